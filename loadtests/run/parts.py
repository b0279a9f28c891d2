"""A step is a list of parts: the fleet's ramp, the objects set-up, a ClusterLoader2 phase, the load, the probes,
a node join, a rolling upgrade or an apiserver restart. The runner walks them and knows none by name.

Each part implements one small protocol: `prepare` before the window (set-up, and what it tells the probes),
`start` as the window opens (in list order), `finish` as it closes (in the reverse order, each writing its own
part of the step's results), `abort` when the step is cut short. One part holds the window open (the load for a
steady window, a ClusterLoader2 phase for as long as its work takes). A part that has nothing to do for a step is
not in its list: each factory of PARTS says so by returning None, so a new kind of part is a class, a line there
and its tests.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil

from loadtests.analysis.restart import restart_notes
from loadtests.binaries import cache as binaries_mod
from loadtests.capture.replay_traffic import topped_up
from loadtests.capture.traffic import LONGRUNNING, open_by_resource
from loadtests.config.plan import Plan, Roll, Step
from loadtests.config.scenarios import needs_node_identities, scenario_params
from loadtests.config.soak import SoakSettings, short_note
from loadtests.config.workload import HeldWatches
from loadtests.controlplane.base import Target, TargetInfo
from loadtests.controlplane.health import HealthWatch
from loadtests.controlplane.prometheus import RunPrometheus
from loadtests.errors import Saturated, TargetError
from loadtests.kube import objects
from loadtests.kube.rest import TRANSPORT_ERRORS
from loadtests.load.generator import LoadGenerator, StepLoad
from loadtests.load.remote import MasterBind
from loadtests.measure.availability import AvailabilityProbe
from loadtests.measure.cluster_objects import ClusterView
from loadtests.measure.probes import StepProbes
from loadtests.measure.processes import HARNESS
from loadtests.measure.profiles import PROFILES_DIR, ProfileSettings
from loadtests.measure.prometheus import scrape_apiserver
from loadtests.measure.saturation import RampWitness
from loadtests.measure.soak import SoakSampler
from loadtests.polling import poll_until
from loadtests.results import StepResult
from loadtests.results.fidelity import FidelitySection
from loadtests.results.loadgen import ClientStat, LoadgenSection
from loadtests.results.scheduling import SchedulingSection
from loadtests.results.soak import SOAK_DIR, SoakMeta
from loadtests.run import fidelity
from loadtests.run.cl2 import Cl2Load, PhaseOutcome
from loadtests.run.fleet import Fleet
from loadtests.run.join import NodeJoin
from loadtests.run.objects import ObjectsSetup
from loadtests.run.promql import measure_step
from loadtests.run.roll import RollingUpgrade, RollRequest, restart_request
from loadtests.shutdown import SHUTDOWN

ABORT_STOP_TIMEOUT_S = 3.0
# kube-controller-manager's garbage collector and quota controller find a new resource by polling discovery every
# 30 s: a replay's installed custom resources are watched within two of its polls, or something is wrong
CONTROL_PLANE_WATCH_TIMEOUT_S = 75.0


@dataclass
class RunParts:
    """What every step of a run shares: the plan, the target and the run-wide helpers the parts act through."""

    plan: Plan
    target: Target
    info: TargetInfo
    fleet: Fleet
    joiner: Fleet  # nodes that join inside a window register as kubelets do, where the target says who that is
    made: ObjectsSetup
    mix: Cl2Load
    run_dir: Path
    workers: int
    say: Callable[[str], None]
    check_alive: Callable[[], None]
    elapsed: Callable[[], str]
    at: Callable[[str], None]  # where the run is now, for the one line that says why it stopped
    watch: HealthWatch | None = None  # told of instances a rolling upgrade or a restart stops on purpose
    roll: RollRequest | None = None
    master: MasterBind | None = None
    ui_port: int | None = None
    final_run: bool = True  # no run of the same command follows (remote workers may go after the last step)
    steps_total: int | None = None  # a plan's own steps; None: a capacity search, which does not know
    view: ClusterView | None = None  # the nodes and pods watched for every window (None: each window its own)
    prometheus: RunPrometheus | None = None  # the run's own (`prometheus: {enabled: true}`), for the PromQL figures
    soak: SoakSettings | None = None  # `loadtest soak`: the one step's window is sampled for its trends


@dataclass
class ProbeSettings:
    """What the parts tell the probes before the window: what to count, whose pods to time, where the churn is,
    and why the apiservers' CPU is not profiled ("": it is)."""

    churn_namespace: str
    counted: dict[str, str] = field(default_factory=dict)
    controlled: list[str] = field(default_factory=list)
    selector: str = ""
    apiserver_cpu_skipped: str = ""
    families: set[str] = field(default_factory=set)  # more apiserver metric families the window's scrapes keep

    @classmethod
    def of(cls, plan: Plan) -> ProbeSettings:
        """Before any part says more: the pod churn's namespace is where pod startup is timed."""
        return cls(plan.load.get("pod_churn", {}).get("namespace") or objects.NS_CHURN)


@dataclass
class StepContext:
    """One step as its parts see it: the step, where it writes, and what the parts tell each other (the result
    is handed to each part's finish)."""

    run: RunParts
    index: int
    step: Step
    step_dir: Path
    probes: ProbeSettings
    ramp: dict[str, float | None] = field(default_factory=dict)
    opened: float | None = None  # monotonic time the window opened (the probes' start returned)
    on_open: list[Callable[[], None]] = field(default_factory=list)  # run as the window opens (its first scrape)
    on_close: list[Callable[[], None]] = field(default_factory=list)  # run as it closes (its last scrape)
    # processes the probes measure too (the load's, an instance started in the window); kept until they start
    pids: dict[str, list[int]] = field(default_factory=dict)
    pid_sink: Callable[[str, Iterable[int]], None] | None = None
    # what the apiserver counted of one verb, resource and subresource in the window (the probes' own taken off)
    count_requests: Callable[[str, str, str], int | None] = lambda verb, resource, subresource: None
    measured: StepProbes | None = None  # the window's probes, once started: its scrapes and times
    notes: list[str] = field(default_factory=list)  # what a part noted before the window, for the step's results

    @property
    def prefix(self) -> str:
        total = self.run.steps_total
        return f"step {self.index + 1}{f'/{total}' if total else ''} ({self.step.name})"

    def say(self, message: str) -> None:
        self.run.say(f"{self.prefix}: {message}")

    def at(self, what: str) -> None:
        self.run.at(f"{self.prefix}: {what}")

    def add_pids(self, component: str, pids: Iterable[int]) -> None:
        """Measure these processes too: from the probes' start if they have not started yet, else from now."""
        if self.pid_sink is not None:
            self.pid_sink(component, pids)
        else:
            self.pids.setdefault(component, []).extend(pids)

    @staticmethod
    def fire(hooks: list[Callable[[], None]]) -> Callable[[], None]:
        """One callable that runs every hook, in order (the list is read when it fires)."""
        def run() -> None:
            for hook in hooks:
                hook()
        return run


class Part(Protocol):
    """One thing a step does or measures. `phase` and `closing` name where the run is while the part prepares
    and starts, and while it finishes (for the line that says why a run stopped)."""

    phase: str
    closing: str

    def prepare(self, ctx: StepContext) -> None: ...

    def start(self, ctx: StepContext) -> None: ...

    def finish(self, ctx: StepContext, result: StepResult) -> None: ...

    def abort(self) -> None: ...


class Holder(Protocol):
    """The part that keeps the window open until the step's work is done; the health watch may cut it short."""

    def hold(self, ctx: StepContext) -> None: ...


class _Part:
    """A part's steps that it has nothing to do in."""

    phase = ""
    closing = "gathering"

    def prepare(self, ctx: StepContext) -> None:
        pass

    def start(self, ctx: StepContext) -> None:
        pass

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        pass

    def abort(self) -> None:
        pass


class FleetRamp(_Part):
    """The step's nodes Ready and its pods Running, then the settling time; a fleet that does not converge is the
    run's breaking point (Saturated, with what the control plane showed meanwhile)."""

    phase = "node ramp"

    def prepare(self, ctx: StepContext) -> None:
        step, fleet = ctx.step, ctx.run.fleet
        witness = RampWitness(ctx.run.target.info(), fleet.client)
        try:
            ramp = fleet.scale_nodes(step.nodes, timeout_s=step.ramp_timeout_s, progress=ctx.say)
            ctx.say(f"{step.nodes} nodes Ready in {ramp.seconds:.1f} s")
            ctx.at("pod ramp")
            pods_s = fleet.scale_pods(step.nodes * step.pods_per_node, timeout_s=step.ramp_timeout_s,
                                      progress=ctx.say)
        except Saturated as saturated:
            evidence = witness.evidence()
            ctx.say(f"saturated: {saturated}; {evidence}")
            raise Saturated(saturated.condition, f"{saturated.detail}; {evidence}") from None
        ctx.ramp.update({"nodes_ready_s": round(ramp.seconds, 3), "pods_running_s": round(pods_s, 3),
                         "harness_cpu_s": round(ramp.harness_cpu_s, 3)})
        if step.warmup_s:
            ctx.at("settling")
            ctx.say(f"settling for {step.warmup_s:.0f} s before measuring")
            time.sleep(step.warmup_s)  # the health watch interrupts it if a component fails


class ObjectsPart(_Part):
    """The objects scenario's set of objects at the step's scale; the probes count and time what it made."""

    phase = "objects set-up"

    def prepare(self, ctx: StepContext) -> None:
        made = ctx.run.made
        made.prepare(ctx.step.nodes)  # a template the apiserver refuses stops the run here, before the window
        ctx.probes.counted.update(made.counted())
        ctx.probes.controlled, ctx.probes.selector = list(made.controlled()), made.selector
        replay = ctx.run.plan.replay
        if replay is not None and replay.control_plane_watches:
            ctx.at("control plane watching what the replay installed")
            control_plane_watching(ctx, replay.control_plane_watches)


def control_plane_watching(ctx: StepContext, wanted: Sequence[HeldWatches],
                           timeout_s: float = CONTROL_PLANE_WATCH_TIMEOUT_S) -> None:
    """Wait until the apiserver shows, on each resource a replay installed, the watches the original's control
    plane held on it (its components open theirs once discovery shows them the new resource); when they do not
    within `timeout_s`, the step says so in a note and goes on (the fidelity then judges those watches short)."""
    short: list[str] = []

    def held() -> bool:
        now = _open_watches(ctx.run.info, lambda _line: None)
        short[:] = [f"{w.resource}.{w.group or 'core'} {now.get((w.group, w.resource), 0)} of {w.open}"
                    for w in wanted if now.get((w.group, w.resource), 0) < w.open]
        return not short

    if held():
        return
    ctx.say(f"waiting for the control plane to watch what the replay installed ({'; '.join(short)})")
    started = time.monotonic()
    if poll_until(held, timeout_s, interval_s=1.0):
        ctx.say(f"the control plane watches what the replay installed, after {time.monotonic() - started:.0f} s")
        return
    note = (f"the control plane did not watch what the replay installed within {timeout_s:.0f} s (open watches, "
            f"apiserver {LONGRUNNING}: {'; '.join(short)}): the window's watches of those resources may fall short "
            "of the original's")
    ctx.say(note)
    ctx.notes.append(note)


class Cl2Phase(_Part):
    """A phase of ClusterLoader2's load: its window lasts as long as its operations, then the cluster doing them."""

    def __init__(self, phase: str) -> None:
        self.name = phase
        self.phase = f"{phase} set-up"
        self.outcome: PhaseOutcome | None = None

    def prepare(self, ctx: StepContext) -> None:
        mix = ctx.run.mix
        mix.prepare(self.name)  # what the phase before it left that is not of the mix goes first
        ctx.probes.churn_namespace = mix.pod_namespace(self.name) or ctx.probes.churn_namespace
        ctx.probes.counted.update(mix.counted())
        ctx.probes.controlled, ctx.probes.selector = list(mix.controlled()), mix.selector

    def hold(self, ctx: StepContext) -> None:
        ctx.say(f"{self.name} of ClusterLoader2's load at {ctx.step.nodes} nodes")
        self.outcome = ctx.run.mix.run_phase(self.name, ctx.step.nodes, ctx.step.duration_s,
                                             interrupt=ctx.run.check_alive)

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        if self.outcome is not None:
            result.notes.extend(self.outcome.notes)
            result.rates.extend(self.outcome.rates)
            result.put(SchedulingSection(self.outcome.scheduling))


class Load(_Part):
    """The plan's load (Locust): started before the window, which opens once every user runs (a burst of new
    connections is not the step's steady state); its statistics cover the window's scrapes exactly; a steady
    window it holds itself, for the step's duration."""

    phase = "load start"

    def __init__(self) -> None:
        self.load: LoadGenerator | None = None
        self.untrack: Callable[[], None] = lambda: None

    def prepare(self, ctx: StepContext) -> None:
        """The load as the step asks it, with what the objects set-up made of the plan's scenarios."""
        run, step = ctx.run, ctx.step
        # a replay's watches counted for every client together: those the cluster holds now count toward them
        scenarios = topped_up(run.made.scenarios(run.plan.load), lambda: _open_watches(run.info, ctx.say))
        asked = StepLoad(scenarios, nodes=step.nodes, duration_s=step.duration_s,
                         out_dir=ctx.step_dir, windowed=True, run_id=run.run_dir.name, workers=run.workers,
                         master=run.master, ui_port=run.ui_port,
                         final_step=run.final_run and run.steps_total == ctx.index + 1)
        # each node's agents as that node, where a scenario sends as the nodes and the target can issue them
        needed = needs_node_identities(asked.scenarios)
        identities = run.target.node_identities(asked.all_node_names()) if needed else None
        self.load = LoadGenerator(asked, run.info.load_access or run.info.access,
                                  scenario_access=run.info.scenario_access, node_identities=identities)

    @property
    def quiet(self) -> bool:
        """No user to run (a replay of a profile without traffic): no load generator, the window held by time."""
        return self._load().users.total == 0

    def start(self, ctx: StepContext) -> None:
        if self.quiet:
            ctx.say(f"no load in this step: the window is held for {ctx.step.duration_s:.0f} s")
            return
        load = self._load()
        self.untrack = SHUTDOWN.track(lambda: [f"locust (pid {pid})" for pid in load.pids() if psutil.pid_exists(pid)])
        spawning = time.monotonic()
        load.start()
        self._wait_spawned(ctx)
        ctx.ramp["load_spawn_s"] = round(time.monotonic() - spawning, 3)
        ctx.add_pids("loadgen", load.pids())
        ctx.on_open.append(load.open_window)
        ctx.on_close.append(load.close_window)

    def _wait_spawned(self, ctx: StepContext) -> None:
        """Wait until the load generator runs every user, checking the control plane meanwhile."""
        load = self._load()
        ctx.say(f"starting the load ({load.users.total} users)"
                + (f"; waiting for {load.master.workers} worker(s) at {load.master.address}" if load.master else "")
                + (f"; live view (read-only): {load.ui_url()}" if load.ui_url() else ""))
        limit_s = load.spawn_time_s() + 120
        if poll_until(lambda: load.wait_spawned(timeout=1.0), limit_s, interval_s=0.0,
                      abort=lambda: not load.running() or load.log_full()):
            return
        if load.log_full():
            raise TargetError(f"the load generator's log cannot grow, so its users were never seen running "
                              f"({ctx.prefix}); see {load.log_path}")
        if not load.running():
            load.wait(timeout=5)  # raises saying how Locust ended and the cause its log gives
            raise TargetError(f"the load generator exited before its users were running ({ctx.prefix})")
        raise TargetError(f"the load generator did not start its users within {limit_s:.0f} s ({ctx.prefix}); "
                          f"see {load.log_path}")

    def hold(self, ctx: StepContext) -> None:
        """The load runs through the window, with progress; one that exits early is an error naming the cause its
        log gives."""
        load, started = self._load(), ctx.opened or time.monotonic()
        end, last_said = started + ctx.step.duration_s, started
        every_s = max(10.0, ctx.step.duration_s / 60)  # a soak of hours says where it is a minute or two apart
        while (left := end - time.monotonic()) > 0:
            if not self.quiet and not load.running():
                load.wait(timeout=5)  # raises saying how Locust ended and the cause its log gives
                raise TargetError(f"the load generator exited during the measured window ({ctx.prefix})")
            time.sleep(min(1.0, left))
            if time.monotonic() - last_said >= every_s and time.monotonic() < end:
                last_said = time.monotonic()
                ctx.say(f"measuring {last_said - started:.0f}/{ctx.step.duration_s:.0f} s "
                        f"[elapsed {ctx.run.elapsed()}]")

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        if self.quiet:
            result.put(LoadgenSection())
            return
        outcome = self._wait(ctx)
        self.untrack()
        # the scenarios' rates, before a phase's (which finishes after the load)
        result.put(LoadgenSection(outcome.client, list(outcome.rates), outcome.workers))
        result.notes.extend(restart_notes(result, scenario_params(ctx.run.plan.load)))
        result.server_requests = server_counts(ctx.count_requests, outcome.client)
        result.notes.extend(outcome.notes)

    def _wait(self, ctx: StepContext) -> Any:
        """The load's figures once it has written them and quit (in a thread, so the health watch can still
        interrupt the main thread)."""
        done: dict[str, Any] = {}

        def wait() -> None:
            try:
                done["outcome"] = self._load().wait()
            except BaseException as error:  # noqa: BLE001 - handed to the main thread
                done["error"] = error

        waiter = threading.Thread(target=wait, name="load-wait", daemon=True)
        waiter.start()
        while waiter.is_alive():
            waiter.join(timeout=10)
            if waiter.is_alive():
                ctx.say(f"waiting for the load generator to stop [elapsed {ctx.run.elapsed()}]")
        if "error" in done:
            raise done["error"]
        return done["outcome"]

    def abort(self) -> None:
        if self.load is not None:
            self.load.stop(timeout_s=ABORT_STOP_TIMEOUT_S)  # an aborted step's figures are not kept
        self.untrack()

    def _load(self) -> LoadGenerator:
        assert self.load is not None, "the load is made when the step is prepared"
        return self.load


def _open_watches(info: TargetInfo, say: Callable[[str], None]) -> dict[tuple[str, str], int]:
    """Watches open per (group, resource) now, from the apiserver's /metrics; none, said, where it does not answer
    (a replay's watches counted for every client together are then held whole)."""
    try:
        return open_by_resource(scrape_apiserver(info.access, families={LONGRUNNING}))
    except (*TRANSPORT_ERRORS, OSError) as error:  # urllib3's own errors are no OSError
        say(f"the watches open before the load are not known (the apiserver's /metrics: {error}): the replay "
            "holds its watches whole, the cluster's own besides")
        return {}


def server_counts(count: Callable[[str, str, str], int | None], client: list[ClientStat]) -> dict[str, int]:
    """What the apiserver counted for each verb+resource the load sent (e.g. "POST pods"), WATCH aside."""
    counts: dict[str, int] = {}
    for stat in client:
        verb, _, rest = stat.name.partition(" ")
        if verb != stat.type or verb == "WATCH" or not rest:
            continue
        resource, _, subresource = rest.split(" ")[0].partition("/")
        key = f"{verb} {resource}" + (f"/{subresource}" if subresource else "")
        if key not in counts:
            found = count(verb, resource, subresource)
            if found is not None:
                counts[key] = found
    return counts


class Probes(_Part):
    """Every probe the plan runs (measure/probes.py): they open the window with their first scrape and close it
    with their last, before the load stops (stopping is in no figure)."""

    phase = "measuring"

    def __init__(self) -> None:
        self.probes: StepProbes | None = None

    def start(self, ctx: StepContext) -> None:
        run, settings = ctx.run, ctx.probes
        profiles = None
        if "profiles" in run.plan.probes():
            profiles = ProfileSettings(ctx.step_dir / PROFILES_DIR, run.run_dir, ctx.step.duration_s,
                                       fixed=not ctx.step.phase, cpu_max_s=run.plan.profiles.cpu_max_s,
                                       apiserver_cpu_skipped=settings.apiserver_cpu_skipped)
        self.probes = probes = StepProbes(
            run.info, probe_namespace=objects.NS_PROBE, churn_namespace=settings.churn_namespace,
            scrapes_dir=ctx.step_dir, counted=settings.counted, controlled=settings.controlled,
            objects_selector=settings.selector, profiles=profiles, probes=run.plan.probes(), view=run.view,
            extra_families=settings.families)
        ctx.count_requests, ctx.measured = probes.count_requests, probes
        for component, pids in {**ctx.pids, HARNESS: [os.getpid()]}.items():  # the harness itself too
            probes.add_pids(component, pids)
        ctx.pid_sink = probes.add_pids
        probes.start(on_window_start=ctx.fire(ctx.on_open), on_window_close=ctx.fire(ctx.on_close))
        ctx.opened = time.monotonic()

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        assert self.probes is not None
        ctx.run.check_alive()  # a component that died after the last health check
        self.probes.gather(result)
        result.duration_s = round(time.monotonic() - (ctx.opened or time.monotonic()), 3)

    def abort(self) -> None:
        if self.probes is not None:
            self.probes.stop()


class SoakSampling(_Part):
    """A soak's sampler (measure/soak.py) through the window: started once the probes have opened it, stopped
    before they close it. Its samples are on disk as they are taken (results/soak.py), so a soak cut short keeps
    every one, and the step's results carry none of them twice."""

    phase = "measuring"
    closing = "soak sampling"

    def __init__(self, soak: SoakSettings) -> None:
        self.soak = soak
        self.sampler: SoakSampler | None = None

    def start(self, ctx: StepContext) -> None:
        run = ctx.run
        here = run.info.kind == "local"  # an existing cluster's components run on machines of their own
        meta = SoakMeta(run_id=run.run_dir.name, step=ctx.step.name, nodes=ctx.step.nodes, hours=self.soak.hours,
                        interval_s=self.soak.interval_s, settle_s=self.soak.settle_seconds,
                        memory_limit_bytes=float(psutil.virtual_memory().total) if here else None)
        pids = {**run.info.pids, **ctx.pids, HARNESS: [os.getpid()]}  # the load generator's and the harness's too
        self.sampler = SoakSampler(run.info, pids, meta, run.run_dir, ctx.say)
        ctx.say(f"soak: sampling every {self.soak.interval_s:g} s for {self.soak.hours:g} h into "
                f"{run.run_dir / SOAK_DIR}")
        if note := short_note(self.soak):
            meta.notes.append(note)
            ctx.say(f"soak: {note}")
        self.sampler.start()

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        self.abort()

    def abort(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()


class ReplayCheck(_Part):
    """A replay's fidelity (run/fidelity.py): once the probes have closed the window, the replaying cluster is
    captured and compared with the original profile × k, in the step's replay_fidelity section."""

    closing = "capturing the replay"

    def prepare(self, ctx: StepContext) -> None:
        ctx.probes.families.update(fidelity.FAMILIES)  # the window's scrapes give the replay's traffic

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        probes = ctx.measured
        window = fidelity.Window(None, None) if probes is None else fidelity.Window(
            probes.start_snapshot, probes.end_snapshot, probes.window.opened_at, probes.window.closed_at)
        ctx.say("capturing the replaying cluster to compare it with the original")
        found = fidelity.measure_fidelity(ctx.run.plan, ctx.run.info, window)
        result.put(FidelitySection(found))
        tally = (found.compared or {}).get("targets") or {}
        ctx.say(f"replay fidelity: {found.error}" if found.error else "replay fidelity: " + ", ".join(
            f"{n} {verdict}" for verdict, n in tally.items()))


class PromqlFigures(_Part):
    """The plan's PromQL figures and checks (run/promql.py), asked of the run's Prometheus once the probes have
    closed the window: instant queries at its close over its length."""

    closing = "PromQL figures"

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        run, probes = ctx.run, ctx.measured
        if run.prometheus is None or probes is None:
            return
        opened, closed = probes.window.opened_at, probes.window.closed_at
        if opened is None or closed is None:
            return
        found = measure_step(run.prometheus, run.plan.figures, run.plan.checks, opened, closed,
                             run.plan.prometheus.scrape_interval_s)
        result.put(found)
        measured = sum(f.value is not None for f in found.promql)
        ctx.say(f"PromQL: {measured} of {len(found.promql)} figures and checks measured; "
                + (found.promql_window.said() if found.promql_window else ""))


class Replacing(_Part):
    """The step's apiservers (or, in a rehearsal, every component) replaced one at a time while the window
    measures: a rolling upgrade, or a restart on the same version. Their CPU is not profiled: a graceful stop
    waits for the requests in flight, a profile of the window's length among them."""

    def __init__(self, ctx: StepContext, rolling: RollRequest, settings: Roll, probe: AvailabilityProbe | None,
                 field_name: str, why_unprofiled: str, starting: str) -> None:
        run = ctx.run
        self.field_name, self.why, self.starting = field_name, why_unprofiled, starting
        self.phase = "measuring"
        self.closing = "rolling upgrade's last instance" if field_name == "roll" else "apiserver restart"
        self.upgrade = RollingUpgrade(rolling, settings, run.plan.target.topology, run.target,  # type: ignore[arg-type]
                                      run.watch, probe, say=ctx.say,  # type: ignore[arg-type]
                                      on_replaced=lambda instance, pid: ctx.add_pids(instance, [pid]))

    def prepare(self, ctx: StepContext) -> None:
        ctx.probes.apiserver_cpu_skipped = self.why

    def start(self, ctx: StepContext) -> None:
        ctx.say(self.starting)
        self.upgrade.start(ctx.opened or time.monotonic())

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        setattr(result, self.field_name, self.upgrade.finish())

    def abort(self) -> None:
        self.upgrade.abort()


def rolling_upgrade(ctx: StepContext) -> Replacing | None:
    """The rehearsal's rolling upgrade, in the step it rolls in."""
    request, run = ctx.run.roll, ctx.run
    if request is None or request.step_index != ctx.index:
        return None
    settings = run.plan.roll
    probe = AvailabilityProbe(run.info.access, run.info.apiservers, settings.probe_qps)
    return Replacing(ctx, request, settings, probe, "roll",
                     "its instances are replaced by the rolling upgrade in this window",
                     f"rolling upgrade to {request.to_bins.kube_version} after {settings.steady_s:.0f} s of "
                     "steady figures")


def apiserver_restart(ctx: StepContext) -> Replacing | None:
    """`steps[].restart_apiserver_at_s`: a rolling upgrade's move onto the version the apiservers run, without
    the availability probe, the health watch told as for a roll."""
    at_s = ctx.step.restart_apiserver_at_s
    if at_s is None:
        return None
    bins = binaries_mod.find(ctx.run.plan.target.kube_version)
    settings = Roll(steady_s=at_s, pause_s=ctx.run.plan.roll.pause_s)
    return Replacing(ctx, restart_request(ctx.index, bins), settings, None, "restart",
                     "it is restarted in this window", f"restarting the apiserver {at_s:g} s into the window")


class Join(_Part):
    """Nodes that join while the window measures (`steps[].join`), registered as kubelets do."""

    phase = "measuring"

    def __init__(self, ctx: StepContext) -> None:
        self.joining = NodeJoin(ctx.run.joiner, ctx.step.nodes, ctx.step.join, timeout_s=ctx.step.ramp_timeout_s)

    def start(self, ctx: StepContext) -> None:
        self.joining.start()

    def finish(self, ctx: StepContext, result: StepResult) -> None:
        result.notes.extend(self.joining.finish())
        if self.joining.seconds is not None:
            result.ramp["join_s"] = round(self.joining.seconds, 3)


# Every kind of part, in the order a step walks them (prepare and start in this order, finish in the reverse):
# the load starts before the probes (the window opens once its users run) and stops after them; what changes the
# control plane in the window starts once it is open. Each factory returns None where its part has nothing to do.
PARTS: tuple[Callable[[StepContext], Part | None], ...] = (
    lambda ctx: FleetRamp(),
    lambda ctx: ObjectsPart() if ctx.run.made.active else None,
    lambda ctx: Cl2Phase(ctx.step.phase) if ctx.step.phase else None,
    lambda ctx: Load(),
    lambda ctx: ReplayCheck() if ctx.run.plan.replay is not None else None,  # finishes once the probes have
    lambda ctx: PromqlFigures() if ctx.run.prometheus is not None else None,  # so does this
    lambda ctx: Probes(),
    lambda ctx: SoakSampling(ctx.run.soak) if ctx.run.soak is not None else None,  # once the probes opened it
    rolling_upgrade,
    apiserver_restart,
    lambda ctx: Join(ctx) if ctx.step.join.nodes > 0 else None,
)


@dataclass
class StepParts:
    """A step's parts in walking order, and the one that holds its window open."""

    parts: list[Part]
    holder: Holder


def step_parts(ctx: StepContext) -> StepParts:
    """The parts this step asks for; the window is held by the first that holds one (a phase before the load)."""
    parts = [part for make in PARTS if (part := make(ctx)) is not None]
    holder = next(part for part in parts if hasattr(part, "hold"))
    return StepParts(parts, holder)  # type: ignore[arg-type]
