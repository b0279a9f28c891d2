"""A rolling upgrade while a step measures: each control-plane instance replaced in turn on another version.

The order is the one the Kubernetes docs give for an upgrade (the version skew policy: no scheduler or
controller-manager newer than an apiserver): every apiserver, one at a time, then the controller-managers,
then the schedulers; a rollback goes the other way round. etcd members are replaced only when their version
changes, which it does not between the Kubernetes versions this harness runs (both use the same etcd): said in
the result's notes. The health watch is told before an instance is stopped on purpose, so the stop is neither
an event of the step nor a fault, and is given the new instance's check once it runs.

A step's apiserver restart (steps[].restart_apiserver_at_s) is the same move: a roll of the apiservers onto the
version they run, without the availability probe (restart_request).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from loadtests.binaries.cache import Binaries
from loadtests.config.plan import Plan, Roll, roll_step
from loadtests.config.topology import APISERVER, CONTROLLER_MANAGER, SCHEDULER, Topology
from loadtests.config.versions import ETCD_VERSION
from loadtests.controlplane.health import HealthCheck
from loadtests.controlplane.local import Replacement
from loadtests.errors import LoadTestError
from loadtests.measure.availability import PROBE, AvailabilityProbe
from loadtests.measure.processes import peak_rss_bytes
from loadtests.results.roll import RollMark, RollResult

UPGRADE_ORDER = (APISERVER, CONTROLLER_MANAGER, SCHEDULER)


class Replaceable(Protocol):
    """A control plane whose instances can be replaced one by one (a local one the harness started)."""

    def replace(self, instance: str, bins: Binaries) -> Replacement: ...

    def health_checks(self) -> list[HealthCheck]: ...


class Watched(Protocol):
    def pause(self, component: str) -> None: ...

    def resume(self, check: HealthCheck) -> None: ...


def roll_order(topology: Topology, downgrade: bool = False, components: tuple[str, ...] = UPGRADE_ORDER) -> list[str]:
    """The instances in the order they are replaced: apiservers, controller-managers, schedulers (a downgrade:
    the reverse, so that no controller ever runs newer than the apiservers it talks to); only `components`'."""
    order = [instance for component in UPGRADE_ORDER if component in components
             for instance in topology.instances(component)]
    return order[::-1] if downgrade else order


def window_refusal(plan: Plan, rollback: bool = False) -> str | None:
    """Why the roll step's window cannot hold the roll, in one line, or None: it must give the steady seconds,
    a pause between one instance and the next, and the recovery the roll is judged on, before the restarts
    themselves (which only the roll measures). A shorter window would close before an instance is replaced,
    and the run would judge a roll that never happened."""
    index = roll_step(plan)
    step, roll = plan.steps[index], plan.roll
    order = roll_order(plan.target.topology)
    replaced = len(order) * (2 if rollback else 1)
    least = roll.steady_s + (replaced - 1) * roll.pause_s + roll.recovery_s
    if step.duration_s >= least:
        return None
    twice = ", each twice (--rollback)" if rollback else ""
    return (f"{plan.source or plan.name}: steps[{index}].duration_s: {step.duration_s:g} s cannot hold a rolling "
            f"upgrade of {len(order)} instances ({', '.join(order)}{twice}): that needs at least {least:g} s "
            f"(roll.steady_s {roll.steady_s:g} + {replaced - 1} × roll.pause_s {roll.pause_s:g} + roll.recovery_s "
            f"{roll.recovery_s:g}, before the restarts themselves); raise duration_s, or lower roll.steady_s, "
            "roll.pause_s or roll.recovery_s")


@dataclass(frozen=True)
class RollRequest:
    """What `loadtest rehearse --rolling` asks of the runner: the step to roll in, the binaries to roll to,
    and whether to roll back to the first version afterwards."""

    step_index: int
    from_bins: Binaries
    to_bins: Binaries
    rollback: bool = False
    components: tuple[str, ...] = UPGRADE_ORDER  # what is replaced (a restart: the apiservers)

    def passes(self) -> list[tuple[Binaries, bool]]:
        """(binaries, downgrade) for each pass of the roll."""
        forward = [(self.to_bins, False)]
        return forward + [(self.from_bins, True)] if self.rollback else forward

    @property
    def restart(self) -> bool:
        """A plain restart: the instances start again on the version they run."""
        return self.from_bins.kube_version == self.to_bins.kube_version

    @property
    def label(self) -> str:
        return "apiserver restart" if self.restart else "rolling upgrade"


def restart_request(step_index: int, bins: Binaries) -> RollRequest:
    """A step's apiserver restart as a roll: every apiserver, one at a time, onto the binaries it runs."""
    return RollRequest(step_index, from_bins=bins, to_bins=bins, components=(APISERVER,))


class RollingUpgrade:
    """Runs in a thread from the window's opening: `steady_s` of steady figures, then each instance replaced,
    `pause_s` apart; beside it the availability probe (a restart has none), from the window's opening to
    `finish()`, which also reads each new process's peak RSS."""

    def __init__(self, request: RollRequest, settings: Roll, topology: Topology, target: Replaceable,
                 watch: Watched | None, probe: AvailabilityProbe | None, say: Callable[[str], None],
                 on_replaced: Callable[[str, int], None] = lambda _instance, _pid: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.request, self.settings, self.topology = request, settings, topology
        self.target, self.watch, self.probe, self.say = target, watch, probe, say
        self.on_replaced = on_replaced  # the new process of an instance (its CPU and memory measured from now)
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=request.label.replace(" ", "-"), daemon=True)
        self._opened = 0.0
        self._pids: dict[str, int] = {}  # each replaced instance's new process
        self.result = RollResult(from_version=request.from_bins.kube_version,
                                 to_version=request.to_bins.kube_version, started_at_s=settings.steady_s,
                                 probe=PROBE if probe is not None else "",
                                 probe_qps=settings.probe_qps if probe is not None else 0.0,
                                 thresholds={"availability_pct": settings.availability_pct,
                                             "recovery_s": settings.recovery_s} if probe is not None else {},
                                 notes=[] if request.restart else
                                 [f"etcd stays on {ETCD_VERSION}: both versions use it, so its members are "
                                  "not replaced"])
        if request.rollback:
            self.result.notes.append(f"rolled back to {request.from_bins.kube_version} after the upgrade: "
                                     "Kubernetes does not promise that a downgrade works; rehearsed as asked")

    def start(self, window_opened: float) -> RollingUpgrade:
        self._opened = window_opened
        if self.probe is not None:
            self.probe.start(window_opened)
        self._thread.start()
        return self

    def _at(self) -> float:
        return round(self._clock() - self._opened, 3)

    def _run(self) -> None:
        if self._stop.wait(max(0.0, self._opened + self.settings.steady_s - self._clock())):
            return
        self.result.started_at_s = self._at()
        first = True
        try:
            for bins, downgrade in self.request.passes():
                for instance in roll_order(self.topology, downgrade, self.request.components):
                    if not first and self._stop.wait(self.settings.pause_s):
                        raise LoadTestError(f"the window closed before {instance} was replaced "
                                            f"({len(self.result.marks)} instances replaced)")
                    first = False
                    self._replace(instance, bins)
            self.result.finished_at_s = self._at()
            self.say(f"{self.request.label} done: {len(self.result.marks)} instances replaced in "
                     f"{self.result.finished_at_s - self.result.started_at_s:.0f} s")
        except Exception as error:  # noqa: BLE001 - the roll's outcome, judged by its verdicts
            self.result.error = str(error) if isinstance(error, LoadTestError) else f"{type(error).__name__}: {error}"
            self.say(f"{self.request.label} stopped: {self.result.error}")

    def _replace(self, instance: str, bins: Binaries) -> None:
        out_at = self._at()
        if self.watch is not None:
            self.watch.pause(instance)
        done = self.target.replace(instance, bins)
        if self.watch is not None:
            check = next((c for c in self.target.health_checks() if c.component == instance), None)
            if check is not None:
                self.watch.resume(check)
        self.on_replaced(instance, done.pid)
        self._pids[instance] = done.pid
        back_at = self._at()
        self.result.marks.append(RollMark(
            instance=instance, version=bins.kube_version, out_at_s=out_at,
            ready_at_s=round(back_at - done.back_s, 3), back_at_s=back_at, stop_s=round(done.stop_s, 3),
            start_to_ready_s=round(done.start_to_ready_s, 3)))
        self.say(f"{self.request.label}: {instance} on {bins.kube_version}, {done.stop_to_ready_s:.1f} s from stop "
                 "to ready")

    def finish(self) -> RollResult:
        """At the window's close: no further instance is started (the one being replaced finishes), then the
        probe stops and its seconds are kept."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        running = dict(self._pids)
        for mark in reversed(self.result.marks):  # an instance's last replacement is the process that runs now
            if mark.instance in running:
                mark.peak_rss_bytes = peak_rss_bytes(running.pop(mark.instance))
        if self.probe is not None:
            self.probe.stop()
            self.result.seconds = self.probe.seconds()
            self.result.hosts_ready = self.probe.hosts_ready()
        return self.result

    def abort(self, timeout_s: float = 5.0) -> None:
        """The run is stopping: no further instance, the probe stopped; teardown stops what runs."""
        self._stop.set()
        if self._thread.is_alive():  # not started when the step failed before its window opened
            self._thread.join(timeout=timeout_s)
        if self.probe is not None:
            self.probe.stop()
