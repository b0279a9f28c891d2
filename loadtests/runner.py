"""Run a plan: bring the target up, step through growing scales, measure each step, write results as it goes.

One direction of flow: plan -> target -> (fleet, probes, load) per step -> results on disk -> report.
A finished step is saved before the next one starts; on a crash, a dead component or Ctrl-C the run is
marked aborted, the partial report is written, and every process it started is stopped.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from loadtests import objects, results
from loadtests.controlplane.base import Target, TargetInfo
from loadtests.errors import LoadTestError, RunAborted, TargetError
from loadtests.fleet import FLEET_USER_AGENT, Fleet
from loadtests.kube.rest import RestClient
from loadtests.load import LoadGenerator
from loadtests.measure.probes import StepProbes
from loadtests.plan import Plan, Step
from loadtests.results import ClientStat, RunResult, StepResult


@dataclass
class RunOptions:
    out_dir: Path
    workers: int | None = None  # None: the plan's value
    kube_version: str | None = None  # overrides the plan's target version (upgrade rehearsals)
    progress: Callable[[str], None] = print
    allow_context: str | None = None  # existing clusters only run when their context is named here


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "python": sys.version.split()[0],
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def server_counts(probes: StepProbes, client: list[ClientStat]) -> dict[str, int]:
    """What the apiserver counted for each verb+resource the load sent (e.g. "POST pods"), WATCH aside."""
    counts: dict[str, int] = {}
    for stat in client:
        verb, _, rest = stat.name.partition(" ")
        if verb != stat.type or verb == "WATCH" or not rest:
            continue
        resource, _, subresource = rest.split(" ")[0].partition("/")
        key = f"{verb} {resource}" + (f"/{subresource}" if subresource else "")
        if key not in counts:
            found = probes.count_requests(verb, resource, subresource)
            if found is not None:
                counts[key] = found
    return counts


class Watchdog:
    """Notices a dead control-plane component while a step runs, and stops the load so the run can end."""

    def __init__(self, check: Callable[[], list[str]], on_failure: Callable[[str], None]) -> None:
        self.check = check
        self.on_failure = on_failure
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            dead = self.check()
            if dead:
                self.reason = f"{', '.join(dead)} stopped running"
                self.on_failure(self.reason)
                return

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self.reason is None and (dead := self.check()):
            # a load that ended on its own between two checks must not hide a component that died
            self.reason = f"{', '.join(dead)} stopped running"


class Runner:
    def __init__(self, plan: Plan, options: RunOptions, target: Target) -> None:
        self.plan = plan
        self.options = options
        self.target = target
        self.say = options.progress
        self.run_result: RunResult | None = None
        self._run_started = 0.0

    # ------------------------------------------------------------------------------------------ run
    def run(self) -> RunResult:
        plan = self.plan
        out = self.options.out_dir
        out.mkdir(parents=True, exist_ok=True)
        environment = {
            "target": plan.target.kind,
            "machine": machine_info(),
            "versions": {"locust": _version("locust"), "k8s-loadtest": _version("k8s-loadtest")},
            "heartbeat_factor": plan.target.heartbeat_factor,
            "workers": self._workers(),
        }
        run = RunResult(run_id=out.name, plan=plan.to_dict(), environment=environment)
        self.run_result = run
        results.save(run, out)
        self._run_started = time.monotonic()
        self.say(f"run {run.run_id}: {len(plan.steps)} steps, about {plan.estimated_seconds() / 60:.1f} min "
                 f"of measurement plus ramps; results in {out}")
        try:
            info = self.target.up()
            run.environment["versions"].update(info.versions)
            run.environment["server"] = "local 127.0.0.1" if info.kind == "local" else "existing cluster"
            results.save(run, out)
            self._steps(run, info)
            run.status = "complete"
        except KeyboardInterrupt:
            run.status, run.error = "aborted", "interrupted by the user (Ctrl-C or SIGTERM)"
            raise RunAborted(run.error) from None
        except LoadTestError as error:
            run.status, run.error = "aborted", str(error)
            raise RunAborted(f"run aborted: {error}") from None
        except Exception as error:
            run.status, run.error = "aborted", f"{type(error).__name__}: {error}"
            raise
        finally:
            run.finished_at = results.utc_now()
            results.save(run, out)
            self._teardown()
        return run

    def _teardown(self) -> None:
        try:
            self.target.down()
        except Exception as error:  # noqa: BLE001 - report, never mask the run's own outcome
            self.say(f"warning: teardown: {error}")

    def _workers(self) -> int:
        return self.plan.workers if self.options.workers is None else self.options.workers

    def _steps(self, run: RunResult, info: TargetInfo) -> None:
        client = RestClient(info.access, user_agent=FLEET_USER_AGENT)
        fleet = Fleet(client)
        try:
            fleet.ensure_namespaces()
            for index, step in enumerate(self.plan.steps):
                step_result = self._step(index, step, info, fleet)
                run.steps.append(step_result)
                results.save(run, self.options.out_dir)  # on disk before the next step starts
                self.say(f"step {index + 1}/{len(self.plan.steps)} done and saved")
        finally:
            client.close()

    def _elapsed(self) -> str:
        seconds = int(time.monotonic() - self._run_started)
        return f"{seconds // 60}m{seconds % 60:02d}s"

    # ------------------------------------------------------------------------------------------ step
    def _step(self, index: int, step: Step, info: TargetInfo, fleet: Fleet) -> StepResult:
        total = len(self.plan.steps)
        remaining = sum(s.warmup_s + s.duration_s for s in self.plan.steps[index:])
        prefix = f"step {index + 1}/{total} ({step.name})"
        self.say(f"{prefix}: scaling to {step.nodes} nodes, {step.nodes * step.pods_per_node} pods "
                 f"[elapsed {self._elapsed()}, about {remaining / 60:.1f} min of steps left]")
        self._check_alive()
        ramp = fleet.scale_nodes(step.nodes, progress=lambda m: self.say(f"{prefix}: {m}"))
        self.say(f"{prefix}: {step.nodes} nodes Ready in {ramp.seconds:.1f} s")
        pods_s = fleet.scale_pods(step.nodes * step.pods_per_node, progress=lambda m: self.say(f"{prefix}: {m}"))
        if step.warmup_s:
            self.say(f"{prefix}: settling for {step.warmup_s:.0f} s before measuring")
            self._sleep_checked(step.warmup_s)

        step_result = StepResult(index=index, name=step.name, nodes=step.nodes, pods_per_node=step.pods_per_node,
                                 started_at=results.utc_now(), duration_s=step.duration_s,
                                 ramp={"nodes_ready_s": round(ramp.seconds, 3), "pods_running_s": round(pods_s, 3),
                                       "harness_cpu_s": round(ramp.harness_cpu_s, 3)})
        info.pids = self._current_pids(info)
        probes = StepProbes(info, probe_namespace=objects.NS_PROBE, churn_namespace=objects.NS_CHURN)
        load = LoadGenerator(self.plan.load, info.access, nodes=step.nodes,
                             out_dir=self.options.out_dir / f"step-{index + 1}", duration_s=step.duration_s,
                             workers=self._workers(), run_id=self.options.out_dir.name, windowed=True)
        try:
            # the window opens once every user runs: a burst of new connections is not the step's steady state
            spawning = time.monotonic()
            load.start()
            self._wait_spawned(load, prefix)
            step_result.ramp["load_spawn_s"] = round(time.monotonic() - spawning, 3)
            probes.add_pids("loadgen", load.pids())
            probes.start(on_window_start=load.open_window)
            started = time.monotonic()
            with Watchdog(self._dead_components, lambda reason: load.stop()) as watchdog:
                outcome = self._wait_load(load, step, prefix, watchdog, started)
            if watchdog.reason:
                raise TargetError(f"{watchdog.reason} during {prefix}")
        except BaseException:
            load.stop()
            probes.stop()
            raise
        step_result.duration_s = round(time.monotonic() - started, 3)
        probes.gather(step_result)
        step_result.client, step_result.rates = outcome.client, outcome.rates
        step_result.server_requests = server_counts(probes, outcome.client)
        step_result.notes.extend(outcome.notes)
        return step_result

    def _wait_spawned(self, load: LoadGenerator, prefix: str) -> None:
        """Wait until the load generator runs every user, checking the control plane meanwhile."""
        self.say(f"{prefix}: starting the load ({load.users.total} users)")
        deadline = time.monotonic() + load.spawn_time_s() + 120
        while not load.wait_spawned(timeout=1.0):
            self._check_alive()
            if not load.running():
                load.wait(timeout=5)  # raises with the tail of Locust's log
                raise TargetError(f"the load generator exited before its users were running ({prefix})")
            if time.monotonic() > deadline:
                raise TargetError(f"the load generator did not start its users within "
                                  f"{load.spawn_time_s() + 120:.0f} s ({prefix}); see {load.log_path}")

    def _wait_load(self, load: LoadGenerator, step: Step, prefix: str, watchdog: Watchdog, started: float) -> Any:
        """Wait for the load to finish while printing progress; the watchdog may cut it short."""
        done: dict[str, Any] = {}

        def wait() -> None:
            try:
                done["outcome"] = load.wait()
            except BaseException as error:  # noqa: BLE001 - handed to the main thread
                done["error"] = error

        waiter = threading.Thread(target=wait, name="load-wait", daemon=True)
        waiter.start()
        while waiter.is_alive():
            waiter.join(timeout=10)
            if waiter.is_alive():
                measured = min(step.duration_s, time.monotonic() - started)
                self.say(f"{prefix}: measuring {measured:.0f}/{step.duration_s:.0f} s [elapsed {self._elapsed()}]")
        if watchdog.reason:
            raise TargetError(f"{watchdog.reason} during {prefix}")
        if "error" in done:
            raise done["error"]
        return done["outcome"]

    def _current_pids(self, info: TargetInfo) -> dict[str, list[int]]:
        return self.target.info().pids

    def _dead_components(self) -> list[str]:
        return self.target.dead_components()

    def _check_alive(self) -> None:
        dead = self._dead_components()
        if dead:
            raise TargetError(f"{', '.join(dead)} stopped running")

    def _sleep_checked(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))
            self._check_alive()
