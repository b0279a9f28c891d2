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
from loadtests.analysis.scrapes import step_folder
from loadtests.analysis.slo import thresholds
from loadtests.binaries.prometheus import PrometheusBinaries, find_prometheus
from loadtests.config.plan import Plan, Step
from loadtests.config.scenarios import configured, needs_node_identities
from loadtests.config.soak import SoakSettings
from loadtests.controlplane.base import Target, TargetInfo
from loadtests.controlplane.health import ANSWER_INTERVAL_S, HealthWatch
from loadtests.controlplane.prometheus import RunPrometheus, scrape_targets
from loadtests.errors import (
    AccessRefused,
    EnvironmentProblem,
    LoadTestError,
    PlanError,
    RunAborted,
    Saturated,
    TargetError,
    disk_full,
    full_disk_line,
    full_disk_of,
    write_error_log,
)
from loadtests.kube.objects import NS_FLEET, node_name
from loadtests.kube.rest import RestClient
from loadtests.load.contract import run_label
from loadtests.load.remote import MasterBind
from loadtests.measure.client_classes import client_classes, run_clients
from loadtests.measure.cluster_objects import ClusterView
from loadtests.results import RunResult, StepEvent, StepResult
from loadtests.results.flow_control import ClientClass
from loadtests.run.capacity import PlannedSteps, StepChooser, step_failures
from loadtests.run.cl2 import Cl2Load
from loadtests.run.fleet import FLEET_USER_AGENT, Fleet
from loadtests.run.objects import ObjectsSetup
from loadtests.run.parts import Part, ProbeSettings, RunParts, StepContext, StepParts, step_parts
from loadtests.run.promql import refuse_unparsable
from loadtests.run.roll import RollRequest
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
    soak: SoakSettings | None = None  # `loadtest soak`: the plan's one step sampled for its trends


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
        self._prometheus: RunPrometheus | None = None  # the run's own, where the plan asks for one
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
                bins = self._prometheus_binaries()
                info = self.target.up()
                self._target_up = True
                run.environment["versions"].update(info.versions)
                run.environment["server"] = "local 127.0.0.1" if info.kind == "local" else "existing cluster"
                run.clients = self._clients(info)
                self._save(run)
                self._start_prometheus(bins, info)
                checks = self.target.health_checks() + (self._prometheus.health_checks() if self._prometheus else [])
                with HealthWatch(checks, self._on_fault, on_event=self._on_event,
                                 unresponsive_s=plan.target.unresponsive_s,
                                 answer_interval_s=ANSWER_INTERVAL_S) as watch:
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
        """What ended the run, as one line: a control plane stopped from outside outranks the component the
        health watch saw end first, and a fault the health watch found outranks the error it caused."""
        fault = SHUTDOWN.take_fault()
        if outside := self.target.stopped_from_outside():
            return RunAborted(outside + self._where())
        full = full_disk_of([self.options.out_dir, *self.target.folders()], f"{fault or ''} {error}")
        if full:  # a component that died on a full disk, or a write of ours refused: the machine's doing
            return EnvironmentProblem(full_disk_line(full, fault or error))
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

    def _prometheus_binaries(self) -> PrometheusBinaries | None:
        """Prometheus's binaries where the plan asks for one, its queries checked first: a query it cannot
        parse is refused before anything starts (bad input)."""
        if not self.plan.prometheus.enabled:
            return None
        bins = find_prometheus()
        refuse_unparsable([*self.plan.figures, *self.plan.checks], bins.promtool, self.plan.source or self.plan.name)
        return bins

    def _start_prometheus(self, bins: PrometheusBinaries | None, info: TargetInfo) -> None:
        if bins is None:
            return
        self._phase = "starting prometheus"
        self._prometheus = RunPrometheus(bins, self.plan.prometheus, self.options.out_dir)
        self._prometheus.start(info)
        targets = sum(len(found) for found in scrape_targets(info).values())
        self.say(f"prometheus {bins.version}: scraping {targets} targets every "
                 f"{self.plan.prometheus.scrape_interval_s:g} s on {self._prometheus.url}")
        self._phase = ""

    def _teardown(self) -> None:
        with SHUTDOWN.shielded():
            if self._prometheus is not None:
                try:
                    kept = self._prometheus.stop()
                    if kept:
                        self.say(f"prometheus: its TSDB kept in {kept} (open it: see docs/promql.md)")
                except Exception as error:  # noqa: BLE001 - report, never mask the run's own outcome
                    self.say(f"warning: teardown of prometheus: {error}")
            try:
                self.target.down()
            except Exception as error:  # noqa: BLE001 - report, never mask the run's own outcome
                self.say(f"warning: teardown: {error}")

    def _clients(self, info: TargetInfo) -> list[ClientClass]:
        """Who the run's clients are to the apiserver's flow control, asked once the target answers (before any
        step, so outside every measured window), and said."""
        agents = needs_node_identities(self.plan.load)
        identities = self.target.node_identities([node_name(0)]) if agents else None
        replay = "requests" in configured(self.plan.load)
        found = client_classes(run_clients(info, identities, agents, replay), info.access)
        self.say("clients to flow control (flow schema / priority level): " + "; ".join(
            f"{c.client} {c.flow_schema or '?'} / {c.priority_level or '?'}" for c in found))
        return found

    def _workers(self) -> int:
        return self.plan.workers if self.options.workers is None else self.options.workers

    def _steps(self, run: RunResult, info: TargetInfo) -> None:
        client = RestClient(info.access, user_agent=FLEET_USER_AGENT)
        fleet = Fleet(client, self.plan.fleet)
        # nodes that join inside a window register as kubelets do, where the target says who a kubelet is
        node_client = RestClient(info.node_access, user_agent=FLEET_USER_AGENT) if info.node_access else None
        label = run_label(self.options.out_dir.name)
        made = ObjectsSetup(client, self.plan.load, label, self.plan.source, self.say)
        mix = Cl2Load(client, asdict(self.plan.cl2), label, self.say)
        joining = Fleet(node_client, self.plan.fleet) if node_client else fleet
        shared = RunParts(self.plan, self.target, info, fleet, joining, made, mix, self.options.out_dir,
                          self._workers(), self.say, self._check_alive, self._elapsed,
                          self._at, self._watch, self.options.roll, self.options.master, self.options.ui_port,
                          final_run=not self.options.runs_follow, steps_total=self._total,
                          view=self._view(info), prometheus=self._prometheus, soak=self.options.soak)
        try:
            fleet.ensure_namespaces()
            if shared.view is not None:
                shared.view.start()  # listed while the fleet is small, then kept current: no window lists them
            limits = thresholds(run)
            step, index = self.chooser.first(), 0
            while step is not None:
                self._step_started = time.monotonic()
                step_result = self._step(index, step, shared)
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
            if shared.view is not None:
                shared.view.stop()

    def _view(self, info: TargetInfo) -> ClusterView | None:
        """The nodes and pods every window's health sampler and pod-startup probe read, watched for the whole run:
        a window then lists none of them, and the churn's pods are watched once for both."""
        if not {"health", "pod_startup"} & set(self.plan.probes()):
            return None
        return ClusterView(info.access, (NS_FLEET, ProbeSettings.of(self.plan).churn_namespace))

    def _at(self, where: str) -> None:
        self._phase = where

    def _elapsed(self) -> str:
        seconds = int(time.monotonic() - self._run_started)
        return f"{seconds // 60}m{seconds % 60:02d}s"

    # ------------------------------------------------------------------------------------------ step
    def _label(self, index: int, step: Step) -> str:
        return f"step {index + 1}{f'/{self._total}' if self._total else ''} ({step.name})"

    def _step(self, index: int, step: Step, shared: RunParts) -> StepResult:
        """The walk of the step's parts: each prepares, the window opens as they start, the holder keeps it
        open, and they finish in the reverse order, each writing its part of the results. The runner knows none
        of them by name."""
        left = ""
        if self._total:
            remaining = sum(s.warmup_s + s.duration_s for s in self.plan.steps[index:])
            left = f", about {remaining / 60:.1f} min of steps left"
        ctx = StepContext(shared, index, step, step_folder(self.options.out_dir, index), ProbeSettings.of(self.plan))
        self.say(f"{ctx.prefix}: scaling to {step.nodes} nodes, {step.nodes * step.pods_per_node} pods "
                 f"[elapsed {self._elapsed()}{left}]")
        self._check_alive()
        walk = step_parts(ctx)
        try:
            for part in walk.parts:
                ctx.at(part.phase)
                part.prepare(ctx)
        except Saturated as saturated:  # the run's breaking point: a finding, not a failure
            return StepResult(index=index, name=step.name, nodes=step.nodes, pods_per_node=step.pods_per_node,
                              started_at=results.utc_now(), duration_s=0.0, status="saturated",
                              saturation={"condition": saturated.condition, "evidence": saturated.detail})
        result = StepResult(index=index, name=step.name, nodes=step.nodes, pods_per_node=step.pods_per_node,
                            started_at=results.utc_now(), duration_s=step.duration_s, ramp=ctx.ramp)
        result.notes.extend(ctx.notes)
        # components restarted since up() have new pids; the run's Prometheus is measured like them
        shared.info.pids = {**self.target.info().pids, **(self._prometheus.pids() if self._prometheus else {})}
        self._window(walk, ctx, result)
        saturation.apply(result, saturation.while_measured(result, os.cpu_count()))
        return result

    def _window(self, walk: StepParts, ctx: StepContext, result: StepResult) -> None:
        """Start the parts (the window opens), hold it, finish them in the reverse order; on any way out, every
        part started is aborted (its figures are not kept: no reason to wait for them)."""
        started: list[Part] = []
        try:
            for part in walk.parts:
                ctx.at(part.phase)
                started.append(part)
                part.start(ctx)
            ctx.at("measuring")
            walk.holder.hold(ctx)
            for part in reversed(walk.parts):
                ctx.at(part.closing)
                part.finish(ctx, result)
                started.remove(part)
        except BaseException:
            with SHUTDOWN.shielded():
                for part in reversed(started):
                    part.abort()
            raise

    def _check_alive(self) -> None:
        dead = self.target.dead_components() + (self._prometheus.dead() if self._prometheus else [])
        if dead:
            raise TargetError(f"{', '.join(dead)} exited")
