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
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from loadtests import results
from loadtests.analysis import saturation
from loadtests.analysis.restart import restart_notes
from loadtests.analysis.scrapes import step_folder
from loadtests.analysis.slo import thresholds
from loadtests.binaries import cache as binaries_mod
from loadtests.config.plan import Plan, Roll, Step
from loadtests.config.scenarios import scenario_params
from loadtests.controlplane.base import Target, TargetInfo
from loadtests.controlplane.health import HealthWatch
from loadtests.errors import (
    AccessRefused,
    EnvironmentProblem,
    LoadTestError,
    PlanError,
    RunAborted,
    Saturated,
    TargetError,
    disk_full,
    full_disk_of,
    write_error_log,
)
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.load.contract import run_label
from loadtests.load.generator import LoadGenerator, StepLoad
from loadtests.load.remote import MasterBind
from loadtests.measure.availability import AvailabilityProbe
from loadtests.measure.probes import StepProbes
from loadtests.measure.processes import HARNESS
from loadtests.measure.profiles import PROFILES_DIR, ProfileSettings
from loadtests.measure.saturation import RampWitness
from loadtests.polling import poll_until
from loadtests.results import RunResult, StepEvent, StepResult
from loadtests.results.loadgen import ClientStat
from loadtests.run.capacity import PlannedSteps, StepChooser, step_failures
from loadtests.run.cl2 import Cl2Load
from loadtests.run.fleet import FLEET_USER_AGENT, Fleet
from loadtests.run.join import NodeJoin
from loadtests.run.objects import ObjectsSetup
from loadtests.run.roll import RollingUpgrade, RollRequest, restart_request
from loadtests.shutdown import SHUTDOWN, interrupt_reason


@dataclass
class RunOptions:
    out_dir: Path
    workers: int | None = None  # None: the plan's value
    kube_version: str | None = None  # overrides the plan's target version (upgrade rehearsals)
    progress: Callable[[str], None] = print
    allow_context: str | None = None  # existing clusters only run when their context is named here
    master: MasterBind | None = None  # each step's master listens here for workers of other machines
    ui_port: int | None = None  # serve Locust's web UI (read-only) on 127.0.0.1 at this port
    runs_follow: int = 0  # runs of the same command after this one (--repeat): workers of other machines stay
    roll: RollRequest | None = None  # a rolling upgrade in one step's window (`loadtest rehearse --rolling`)


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


ABORT_STOP_TIMEOUT_S = 3.0


class Runner:
    def __init__(self, plan: Plan, options: RunOptions, target: Target, chooser: StepChooser | None = None) -> None:
        self.plan = plan
        self.options = options
        self.target = target
        self.chooser = chooser or PlannedSteps(plan)
        # "step 2/3" for a plan's own steps; a search does not know how many it will take
        self._total = len(plan.steps) if isinstance(self.chooser, PlannedSteps) else None
        self.say = options.progress
        self.run_result: RunResult | None = None
        self._run_started = 0.0
        self._phase = ""  # where the run is, for the one line that says why it stopped
        self._step_started: float | None = None
        self._events: list[StepEvent] = []  # the health watch's, until the step they happened in ends
        self._events_lock = threading.Lock()
        self._watch: HealthWatch | None = None  # told of instances a rolling upgrade stops on purpose
        rolled = options.roll.step_index if options.roll is not None else -1
        if 0 <= rolled < len(plan.steps) and plan.steps[rolled].restart_apiserver_at_s is not None:
            raise PlanError(f"{plan.source or plan.name}: steps[{rolled}].restart_apiserver_at_s: the step a rolling "
                            "upgrade rolls in cannot restart its apiservers too; roll in another step, or remove "
                            "the restart")

    # ------------------------------------------------------------------------------------------ run
    def run(self) -> RunResult:
        """Run every step; teardown comes first and always runs, then the results are saved. Whatever
        stopped the run is raised as one LoadTestError (RunAborted, or EnvironmentProblem for a full disk)."""
        plan = self.plan
        out = self.options.out_dir
        environment = {
            "target": plan.target.kind,
            "machine": machine_info(),
            "versions": {"locust": _version("locust"), "k8s-loadtest": _version("k8s-loadtest")},
            "heartbeat_factor": plan.target.heartbeat_factor,
            "workers": self._workers(),
        }
        run = RunResult(run_id=out.name, plan=plan.to_dict(), environment=environment)
        self.run_result = run
        self._save(run)  # nothing is started before the results folder is known to take a file
        self._run_started = time.monotonic()
        self._target_up = False  # until up() returns, a refused kubeconfig user is the user's input to fix
        name = getattr(self.target, "name", "")
        what = (f"{len(plan.steps)} steps, about {plan.estimated_seconds() / 60:.1f} min of measurement plus ramps"
                if self._total else f"a capacity search from {plan.steps[0].nodes:,} nodes")
        self.say(f"run {run.run_id}: {what}; results in {out}" + (f"; cluster {name}" if name else ""))
        failure: LoadTestError | None = None
        try:
            try:
                info = self.target.up()
                self._target_up = True
                run.environment["versions"].update(info.versions)
                run.environment["server"] = "local 127.0.0.1" if info.kind == "local" else "existing cluster"
                self._save(run)
                with HealthWatch(self.target.health_checks(), self._on_fault, on_event=self._on_event,
                                 unresponsive_s=plan.target.unresponsive_s) as watch:
                    self._watch = watch
                    self._steps(run, info)
                run.status = "complete"
            except BaseException as error:  # every way out is classified, after teardown has run
                with SHUTDOWN.shielded():
                    failure = self._failure(error)
        finally:
            self._teardown()  # first and unconditional, even if a later signal got in before the shield
        with SHUTDOWN.shielded():
            failure = self._conclude(run, failure)
        if failure is not None:
            raise failure
        return run

    def _conclude(self, run: RunResult, failure: LoadTestError | None) -> LoadTestError | None:
        """After teardown: the run's outcome on disk; a full disk now is the outcome if nothing else was."""
        fault = SHUTDOWN.take_fault()
        failure = failure or fault  # a fault found while tearing down is still the run's outcome
        if failure is not None:
            run.status, run.error = "aborted", str(failure)
        run.finished_at = results.utc_now()
        try:
            self._save(run)
        except EnvironmentProblem as error:
            failure = failure if isinstance(failure, EnvironmentProblem) else error
        return failure

    def _on_event(self, what: str) -> None:
        """From the health watch: a loss the cluster survives, kept with the step it happened in and said."""
        started = self._step_started
        event = StepEvent(at=results.utc_now(), t_s=round(time.monotonic() - started, 3) if started else 0.0,
                          what=what)
        with self._events_lock:
            self._events.append(event)
        self.say(f"event{self._where()}: {what}")

    def _take_events(self) -> list[StepEvent]:
        with self._events_lock:
            taken, self._events = self._events, []
        return taken

    def _on_fault(self, reason: str) -> None:
        """From the health watch: stop the run where it is (the main thread is woken from any wait)."""
        SHUTDOWN.interrupt_main(RunAborted(f"{reason}{self._where()}"))

    def _where(self) -> str:
        return f" during {self._phase}" if self._phase else ""

    def _failure(self, error: BaseException) -> LoadTestError:
        """What ended the run, as one line: a fault the health watch found outranks the error it caused."""
        fault = SHUTDOWN.take_fault()
        full = full_disk_of([self.options.out_dir, *self.target.folders()], f"{fault or ''} {error}")
        if full:  # a component that died on a full disk, or a write of ours refused: the machine's doing
            cause = fault or f"{type(error).__name__}: {error}"
            return EnvironmentProblem(f"{full}; {cause}"[:600])
        if fault is not None:
            return fault
        if isinstance(error, KeyboardInterrupt):
            return RunAborted(interrupt_reason(error) + self._where())
        if isinstance(error, MemoryError):
            return EnvironmentProblem("out of memory" + self._where())
        if isinstance(error, AccessRefused) and not self._target_up:
            return error  # the kubeconfig's user, refused before anything ran: bad input (2), not an abort
        if isinstance(error, PlanError):
            return error  # what the plan asks, refused by the apiserver before a window: bad input (2)
        if isinstance(error, EnvironmentProblem | RunAborted):
            return error
        if isinstance(error, LoadTestError):
            return RunAborted(f"{error}{self._where()}")
        log = write_error_log(self.options.out_dir, error)
        return RunAborted(f"unexpected error{self._where()}: {type(error).__name__}: {error}; details in {log}")

    def _save(self, run: RunResult) -> None:
        try:
            results.save(run, self.options.out_dir)
        except OSError as error:
            raise EnvironmentProblem(disk_full(self.options.out_dir) or
                                     f"cannot write {self.options.out_dir / results.RESULTS_FILE} "
                                     f"({error.strerror}); the last good copy is kept") from None

    def _teardown(self) -> None:
        with SHUTDOWN.shielded():
            try:
                self.target.down()
            except Exception as error:  # noqa: BLE001 - report, never mask the run's own outcome
                self.say(f"warning: teardown: {error}")

    def _workers(self) -> int:
        return self.plan.workers if self.options.workers is None else self.options.workers

    def _steps(self, run: RunResult, info: TargetInfo) -> None:
        client = RestClient(info.access, user_agent=FLEET_USER_AGENT)
        fleet = Fleet(client)
        # nodes that join inside a window register as kubelets do, where the target says who a kubelet is
        node_client = RestClient(info.node_access, user_agent=FLEET_USER_AGENT) if info.node_access else None
        joiner = Fleet(node_client) if node_client else fleet
        made = ObjectsSetup(client, self.plan.load, run_label(self.options.out_dir.name), self.plan.source, self.say)
        mix = Cl2Load(client, asdict(self.plan.cl2), run_label(self.options.out_dir.name), self.say)
        try:
            fleet.ensure_namespaces()
            limits = thresholds(run)
            step, index = self.chooser.first(), 0
            while step is not None:
                self._step_started = time.monotonic()
                step_result = self._step(index, step, info, fleet, joiner, made, mix)
                step_result.events = self._take_events()
                run.steps.append(step_result)
                self._phase = f"saving step {index + 1}"
                self._save(run)  # on disk before the next step starts
                failures = step_failures(step_result, limits)
                self.say(f"{self._label(index, step)} done and saved"
                         + (f"; did not hold: {'; '.join(failures)}" if failures else ""))
                step, index = self.chooser.next(step_result, not failures), index + 1
        finally:
            with SHUTDOWN.shielded():  # what the load made goes, whatever ended the run
                for problem in made.remove():
                    self.say(f"warning: clean-up of the objects scenario: {problem}")
                for problem in mix.remove():
                    self.say(f"warning: clean-up of the ClusterLoader2 load: {problem}")
            client.close()
            if node_client:
                node_client.close()

    def _elapsed(self) -> str:
        seconds = int(time.monotonic() - self._run_started)
        return f"{seconds // 60}m{seconds % 60:02d}s"

    # ------------------------------------------------------------------------------------------ step
    def _label(self, index: int, step: Step) -> str:
        return f"step {index + 1}{f'/{self._total}' if self._total else ''} ({step.name})"

    def _step(self, index: int, step: Step, info: TargetInfo, fleet: Fleet, joiner: Fleet,
              made: ObjectsSetup, mix: Cl2Load) -> StepResult:
        prefix = self._label(index, step)
        left = ""
        if self._total:
            remaining = sum(s.warmup_s + s.duration_s for s in self.plan.steps[index:])
            left = f", about {remaining / 60:.1f} min of steps left"
        self.say(f"{prefix}: scaling to {step.nodes} nodes, {step.nodes * step.pods_per_node} pods "
                 f"[elapsed {self._elapsed()}{left}]")
        self._check_alive()
        witness = RampWitness(self.target.info(), fleet.client)
        try:
            self._phase = f"{prefix}: node ramp"
            ramp = fleet.scale_nodes(step.nodes, timeout_s=step.ramp_timeout_s,
                                     progress=lambda m: self.say(f"{prefix}: {m}"))
            self.say(f"{prefix}: {step.nodes} nodes Ready in {ramp.seconds:.1f} s")
            self._phase = f"{prefix}: pod ramp"
            pods_s = fleet.scale_pods(step.nodes * step.pods_per_node, timeout_s=step.ramp_timeout_s,
                                      progress=lambda m: self.say(f"{prefix}: {m}"))
        except Saturated as saturated:
            evidence = witness.evidence()
            self.say(f"{prefix}: saturated: {saturated}; {evidence}")
            return StepResult(index=index, name=step.name, nodes=step.nodes, pods_per_node=step.pods_per_node,
                              started_at=results.utc_now(), duration_s=0.0, status="saturated",
                              saturation={"condition": saturated.condition,
                                          "evidence": f"{saturated.detail}; {evidence}"})
        if step.warmup_s:
            self._phase = f"{prefix}: settling"
            self.say(f"{prefix}: settling for {step.warmup_s:.0f} s before measuring")
            time.sleep(step.warmup_s)  # the health watch interrupts it if a component fails

        step_result = StepResult(index=index, name=step.name, nodes=step.nodes, pods_per_node=step.pods_per_node,
                                 started_at=results.utc_now(), duration_s=step.duration_s,
                                 ramp={"nodes_ready_s": round(ramp.seconds, 3), "pods_running_s": round(pods_s, 3),
                                       "harness_cpu_s": round(ramp.harness_cpu_s, 3)})
        info.pids = self.target.info().pids  # components restarted since up() have new pids
        step_dir = step_folder(self.options.out_dir, index)
        churn_namespace = self.plan.load.get("pod_churn", {}).get("namespace") or objects.NS_CHURN
        if made.active:
            self._phase = f"{prefix}: objects set-up"
            made.prepare(step.nodes)  # a template the apiserver refuses stops the run here, before the window
        phased = bool(step.phase)
        if phased:
            self._phase = f"{prefix}: {step.phase} set-up"
            mix.prepare(step.phase)  # what the phase before it left that is not of the mix goes first
            churn_namespace = mix.pod_namespace(step.phase) or churn_namespace
        probes = StepProbes(info, probe_namespace=objects.NS_PROBE, churn_namespace=churn_namespace,
                            scrapes_dir=step_dir, counted={**made.counted(), **(mix.counted() if phased else {})},
                            controlled=mix.controlled() if phased else made.controlled(),
                            objects_selector=mix.selector if phased else made.selector,
                            profiles=ProfileSettings(step_dir / PROFILES_DIR, self.options.out_dir, step.duration_s,
                                                     fixed=not phased, cpu_max_s=self.plan.profiles.cpu_max_s,
                                                     apiserver_cpu_skipped=self._replaced(index, step))
                            if self.plan.profiles.enabled else None)
        final = self._total is not None and index + 1 == self._total and not self.options.runs_follow
        asked = StepLoad(made.scenarios(self.plan.load), nodes=step.nodes, duration_s=step.duration_s,
                         out_dir=step_dir, windowed=True, run_id=self.options.out_dir.name, workers=self._workers(),
                         master=self.options.master, ui_port=self.options.ui_port, final_step=final)
        load = LoadGenerator(asked, info.load_access or info.access, scenario_access=info.scenario_access)
        untrack = SHUTDOWN.track(lambda: [f"locust (pid {pid})" for pid in load.pids() if psutil.pid_exists(pid)])
        rolling = self._rolling(index, info, probes, prefix)
        restarting = self._restarting(index, step, probes, prefix)
        try:
            # the window opens once every user runs: a burst of new connections is not the step's steady state
            self._phase = f"{prefix}: load start"
            spawning = time.monotonic()
            load.start()
            self._wait_spawned(load, prefix)
            step_result.ramp["load_spawn_s"] = round(time.monotonic() - spawning, 3)
            probes.add_pids("loadgen", load.pids())
            probes.add_pids(HARNESS, [os.getpid()])  # the harness itself; the Locust processes are loadgen's
            self._phase = f"{prefix}: measuring"
            probes.start(on_window_start=load.open_window)
            started = time.monotonic()
            if rolling is not None:
                self.say(f"{prefix}: rolling upgrade to {rolling.request.to_bins.kube_version} after "
                         f"{self.plan.roll.steady_s:.0f} s of steady figures")
                rolling.start(started)
            if restarting is not None:
                self.say(f"{prefix}: restarting the apiserver {step.restart_apiserver_at_s:g} s into the window")
                restarting.start(started)
            joining = NodeJoin(joiner, step.nodes, step.join, timeout_s=step.ramp_timeout_s)
            joining.start()
            if phased:  # the window lasts as long as the phase: its operations, then the cluster doing them
                self.say(f"{prefix}: {step.phase} of ClusterLoader2's load at {step.nodes} nodes")
                phase = mix.run_phase(step.phase, step.nodes, step.duration_s, interrupt=self._check_alive)
                step_result.notes.extend(phase.notes)
            else:
                self._measure(load, step, prefix, started)
            step_result.notes.extend(joining.finish())
            if joining.seconds is not None:
                step_result.ramp["join_s"] = round(joining.seconds, 3)
            if rolling is not None:
                self._phase = f"{prefix}: rolling upgrade's last instance"
                step_result.roll = rolling.finish()
            if restarting is not None:
                self._phase = f"{prefix}: apiserver restart"
                step_result.restart = restarting.finish()
            self._check_alive()  # a component that died after the last health check
            self._phase = f"{prefix}: gathering"
            # the window closes with the end scrape, before the load stops: stopping is in no figure
            probes.gather(step_result, on_window_close=load.close_window)
            step_result.duration_s = round(time.monotonic() - started, 3)
            outcome = self._wait_load(load, prefix)
            saturation.apply(step_result, saturation.while_measured(step_result, os.cpu_count()))
        except BaseException:
            with SHUTDOWN.shielded():  # an aborted step's figures are not kept: no reason to wait for them
                for moving in (rolling, restarting):
                    if moving is not None:
                        moving.abort()
                load.stop(timeout_s=ABORT_STOP_TIMEOUT_S)
                probes.stop()
            raise
        finally:
            untrack()
        step_result.client, step_result.rates = outcome.client, outcome.rates
        step_result.notes.extend(restart_notes(step_result, scenario_params(self.plan.load)))
        if phased:
            step_result.rates.extend(phase.rates)
            step_result.scheduling = phase.scheduling
        step_result.server_requests = server_counts(probes, outcome.client)
        step_result.workers = outcome.workers
        step_result.notes.extend(outcome.notes)
        return step_result

    def _rolling(self, index: int, info: TargetInfo, probes: StepProbes, prefix: str) -> RollingUpgrade | None:
        """The rolling upgrade of this step, if it is the one a rehearsal rolls in (not started yet)."""
        request = self.options.roll
        if request is None or request.step_index != index:
            return None
        settings = self.plan.roll
        probe = AvailabilityProbe(info.access, info.apiservers, settings.probe_qps)
        return RollingUpgrade(request, settings, self.plan.target.topology, self.target,  # type: ignore[arg-type]
                              self._watch, probe, say=lambda m: self.say(f"{prefix}: {m}"),
                              on_replaced=lambda instance, pid: probes.add_pids(instance, [pid]))

    def _replaced(self, index: int, step: Step) -> str:
        """Why this step's apiservers are not CPU-profiled: they are replaced in its window, and a graceful stop
        waits for the requests in flight, a profile of the window's length among them ("": they are profiled)."""
        if self.options.roll is not None and self.options.roll.step_index == index:
            return "its instances are replaced by the rolling upgrade in this window"
        if step.restart_apiserver_at_s is not None:
            return "it is restarted in this window"
        return ""

    def _restarting(self, index: int, step: Step, probes: StepProbes, prefix: str) -> RollingUpgrade | None:
        """The step's apiserver restart (not started yet): a rolling upgrade's move onto the version it runs,
        `restart_apiserver_at_s` into the window, the health watch told as for a roll."""
        if step.restart_apiserver_at_s is None:
            return None
        bins = binaries_mod.find(self.plan.target.kube_version)
        settings = Roll(steady_s=step.restart_apiserver_at_s, pause_s=self.plan.roll.pause_s)
        return RollingUpgrade(restart_request(index, bins), settings, self.plan.target.topology,
                              self.target, self._watch, None,  # type: ignore[arg-type]
                              say=lambda m: self.say(f"{prefix}: {m}"),
                              on_replaced=lambda instance, pid: probes.add_pids(instance, [pid]))

    def _wait_spawned(self, load: LoadGenerator, prefix: str) -> None:
        """Wait until the load generator runs every user, checking the control plane meanwhile."""
        self.say(f"{prefix}: starting the load ({load.users.total} users)"
                 + (f"; waiting for {load.master.workers} worker(s) at {load.master.address}" if load.master else "")
                 + (f"; live view (read-only): {load.ui_url()}" if load.ui_url() else ""))
        limit_s = load.spawn_time_s() + 120
        if poll_until(lambda: load.wait_spawned(timeout=1.0), limit_s, interval_s=0.0,
                      abort=lambda: not load.running() or load.log_full()):
            return
        if load.log_full():
            raise TargetError(f"the load generator's log cannot grow, so its users were never seen running "
                              f"({prefix}); see {load.log_path}")
        if not load.running():
            load.wait(timeout=5)  # raises with the tail of Locust's log
            raise TargetError(f"the load generator exited before its users were running ({prefix})")
        raise TargetError(f"the load generator did not start its users within {limit_s:.0f} s ({prefix}); "
                          f"see {load.log_path}")

    def _measure(self, load: LoadGenerator, step: Step, prefix: str, started: float) -> None:
        """Let the load run through the measured window, printing progress; the health watch may cut it short,
        and a load generator that exits early is an error with the tail of its log."""
        end = started + step.duration_s
        last_said = started
        while (left := end - time.monotonic()) > 0:
            if not load.running():
                load.wait(timeout=5)  # raises with the tail of Locust's log
                raise TargetError(f"the load generator exited during the measured window ({prefix})")
            time.sleep(min(1.0, left))
            if time.monotonic() - last_said >= 10 and time.monotonic() < end:
                last_said = time.monotonic()
                self.say(f"{prefix}: measuring {last_said - started:.0f}/{step.duration_s:.0f} s "
                         f"[elapsed {self._elapsed()}]")

    def _wait_load(self, load: LoadGenerator, prefix: str) -> Any:
        """The load's figures once it has written them and quit (in a thread, so the health watch can still
        interrupt the main thread)."""
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
                self.say(f"{prefix}: waiting for the load generator to stop [elapsed {self._elapsed()}]")
        if "error" in done:
            raise done["error"]
        return done["outcome"]

    def _check_alive(self) -> None:
        dead = self.target.dead_components()
        if dead:
            raise TargetError(f"{', '.join(dead)} exited")
