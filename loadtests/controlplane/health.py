"""Is every component of the target still answering? Checked through every phase of a run, not only between.

A process that exited is a fault at once. A component that stops answering (a SIGSTOPped etcd looks like a
hung disk; an overloaded apiserver like a dead one) is a fault once it has failed its check without a break
for `unresponsive_s`: then the run stops with one line naming it, rather than measuring a broken control
plane and calling the result an SLO verdict.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from loadtests.controlplane.processes import ProcessRecord, http_ok

CHECK_TIMEOUT_S = 2.0  # http_ok gives up after this
DEFAULT_UNRESPONSIVE_S = 30.0
# how often a run asks every component to answer (its process is looked at every round, each second): a hung one
# is a fault after unresponsive_s (30 s by default) of failed asks, which asks every 5 s find as well as every
# second did, for a fifth of the wakeups (five components asked each second were 0.23 % of a core at 1,000 nodes)
ANSWER_INTERVAL_S = 5.0


@dataclass(frozen=True)
class HealthCheck:
    """One component's check: `probe` returns None when healthy, else what is wrong, in a few words.

    `group` is the component an instance belongs to (kube-apiserver for kube-apiserver-2) and `tolerated` how
    many of its instances the cluster survives losing (one of three etcd members, all apiservers but one): a
    failure within that is an event of the run, not its end."""

    component: str
    probe: Callable[[], str | None]
    group: str = ""
    tolerated: int = 0
    # the part of `probe` that asks nothing of the component (its process: exited, stopped), looked at on the
    # rounds between those that ask it to answer (None: a check that is all asking)
    alive: Callable[[], str | None] | None = None


def process_problem(record: ProcessRecord) -> tuple[str | None, bool]:
    """(what is wrong with the process, whether that is final): exited is final, stopped is not."""
    proc = record.process()
    if proc is None:
        return "exited", True
    try:
        if proc.status() == psutil.STATUS_STOPPED:
            return "is stopped: SIGSTOP", False
    except psutil.Error:
        return "exited", True
    return None, False


FINAL_WORDS = ("exited", "killed by")  # how a probe's problem begins when the process is gone: no wait helps


def is_final(problem: str) -> bool:
    return problem.startswith(FINAL_WORDS)


def endpoint_check(component: str, record: ProcessRecord | None, url: str, what: str,
                   answered: Callable[[str], bool] | None = None,
                   exit_reason: Callable[[ProcessRecord], str | None] | None = None) -> HealthCheck:
    """A component of ours: its process must run, and `url` must answer. `exit_reason` (the process group's,
    where it started the process) says how it ended: its exit code or signal and its own error line."""
    answered = answered or http_ok

    def alive() -> str | None:
        if record is not None:
            problem, final = process_problem(record)
            if final:
                return (exit_reason(record) if exit_reason else None) or f"exited (pid {record.pid})"
            if problem:
                return f"stopped answering {what} (its process {problem})"
        return None

    def probe() -> str | None:
        return alive() or (None if answered(url) else f"stopped answering {what}")

    return HealthCheck(component, probe, alive=alive if record is not None else None)


STOPPED_TOGETHER_S = 8.0  # after the first component is seen gone, how long the others are watched for: etcd
# took 4.3-4.5 s to end on SIGTERM in two runs of the faults test's kill case, a scheduler or kwok under a millisecond
OUTSIDE = "the control plane was stopped from outside"


def stopped_together(gone_at: dict[str, float | None], within_s: float = STOPPED_TOGETHER_S,
                     resolution_s: float = 0.1) -> str | None:
    """"every component ended within 0.4 s of each other: the control plane was stopped from outside", when
    every component, or nearly every one (a kube-apiserver may take its time over its watches), ended within
    `within_s` of the first: what a `kill` of all of them looks like. No crash takes the others with it that fast
    (an apiserver whose etcd died retries it, a scheduler whose apiserver died waits out its lease). `gone_at`:
    each component -> when it was seen gone, in seconds from the first look (`resolution_s` apart), None while
    it runs. None otherwise: a component that ended alone is named by the health watch, as its own failure."""
    gone = {name: at for name, at in gone_at.items() if at is not None and at <= within_s}
    running = [name for name in gone_at if name not in gone]
    if len(gone) < 2 or len(running) > max(1, len(gone_at) // 4):
        return None
    spread = max(max(gone.values()) - min(gone.values()), resolution_s)
    who = (f"{len(gone)} of {len(gone_at)} components ({', '.join(running)} still running)" if running
           else "every component")
    return f"{who} ended within {spread:.1f} s of each other: {OUTSIDE}"


class HealthWatch:
    """Runs every check each `interval_s` in a thread; calls `on_fault(reason)` once, when a component's
    failure is final or has lasted `unresponsive_s`, naming every component failing then (see check_once).

    With `answer_interval_s`, a round asks the components to answer only that often (never less than three
    times within unresponsive_s); the rounds between look at their processes only (HealthCheck.alive), so an
    exit is still seen within a round, and a failure already seen stands until an ask says otherwise."""

    def __init__(self, checks: list[HealthCheck], on_fault: Callable[[str], None], *,
                 unresponsive_s: float = DEFAULT_UNRESPONSIVE_S, interval_s: float = 1.0,
                 answer_interval_s: float | None = None, clock: Callable[[], float] = time.monotonic,
                 on_event: Callable[[str], None] = lambda _event: None) -> None:
        self.checks = checks
        self.answer_interval_s = (None if answer_interval_s is None
                                  else min(answer_interval_s, unresponsive_s / 3))
        self._asked_at: float | None = None
        self.on_fault = on_fault
        self.on_event = on_event  # a failure the cluster survives (see HealthCheck.tolerated), and its end
        self._reported: set[str] = set()
        self.unresponsive_s = unresponsive_s
        self.interval_s = interval_s
        self._clock = clock
        self._failing_since: dict[str, float] = {}
        self._problems: dict[str, str] = {}  # what each failing component's last look found
        self._paused: set[str] = set()  # instances stopped on purpose (a rolling upgrade replaces them)
        self._lock = threading.Lock()
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-watch", daemon=True)

    def check_once(self) -> str | None:
        """One round of checks; the fault's reason when there is one now. Once one component's failure is
        final or has lasted `unresponsive_s`, every component failing at that moment is named: an exited one
        first, then in check order, so a hung etcd is named before the apiserver that went quiet behind it
        (an apiserver already slow under load may have failed its check for longer)."""
        now = self._clock()
        asking = self._ask_now(now)
        failing: list[tuple[bool, str, str]] = []  # (final, what, component), in check order
        lost: dict[str, list[tuple[HealthCheck, str]]] = {}  # group -> its instances failed for good, or long
        with self._lock:
            checks = [c for c in self.checks if c.component not in self._paused]
        for check in checks:
            problem = self._look(check, asking)
            if problem is None and not asking:  # its process runs: a failure the last ask saw stands
                problem = self._problems.get(check.component)
                if problem is None:
                    continue
            with self._lock:  # paused or replaced while this round ran (its process stopped on purpose): not a loss
                if check.component in self._paused or all(c is not check for c in self.checks):
                    continue
            if problem is None:
                self._failing_since.pop(check.component, None)
                self._problems.pop(check.component, None)
                if check.component in self._reported:
                    self._reported.discard(check.component)
                    self.on_event(f"{check.component} answers again")
                continue
            self._problems[check.component] = problem
            since = self._failing_since.setdefault(check.component, now)
            final = is_final(problem)
            what = f"{check.component} {problem}" if final else f"{check.component} {problem} for {now - since:.0f} s"
            failing.append((final, what, check.component))
            if final or now - since >= self.unresponsive_s:
                lost.setdefault(check.group or check.component, []).append((check, what))
        due, beyond, survived = False, "", set()
        for group, instances in lost.items():
            tolerated = max(check.tolerated for check, _ in instances)
            members = [c for c in self.checks if (c.group or c.component) == group]
            total = len(members)
            # an instance stopped on purpose (a rolling upgrade's) is out of the cluster's tolerance too
            down = len(instances) + sum(1 for c in members if c.component in self._paused)
            if down > tolerated:
                due = True
                if tolerated and not beyond:  # a highly available group: say why its losses end the run
                    replaced = " (one of them being replaced)" if down > len(instances) else ""
                    beyond = (f" ({down} of {total} {group} lost{replaced}: more than the {tolerated} "
                              "the cluster survives)")
                continue
            for check, what in instances:  # the cluster goes on without it: said once, as an event
                survived.add(check.component)
                if check.component not in self._reported:
                    self._reported.add(check.component)
                    self.on_event(f"{what}; {total - down} of {total} {group} left")
        if not due:
            return None
        # exited before slow, each in check order; a loss the cluster survived last: it is not why the run ends
        named = [what for last in (False, True) for final in (True, False)
                 for gone, what, component in failing if gone == final and (component in survived) == last]
        also = f" (also: {'; '.join(named[1:])})" if len(named) > 1 else ""
        return named[0] + also + beyond

    @staticmethod
    def _look(check: HealthCheck, asking: bool) -> str | None:
        """What is wrong with one component now: asked to answer, or its process alone looked at."""
        look = check.probe if asking else check.alive
        try:
            return look() if look is not None else None
        except Exception as error:  # a check that cannot run counts as a failing one
            return f"could not be checked ({type(error).__name__}: {error})"

    def _ask_now(self, now: float) -> bool:
        """Whether this round asks every component to answer (every round without answer_interval_s)."""
        if self.answer_interval_s is not None and self._asked_at is not None \
                and now - self._asked_at < self.answer_interval_s:
            return False
        self._asked_at = now
        return True

    def pause(self, component: str) -> None:
        """Stop checking an instance about to be stopped on purpose (a rolling upgrade's), until `resume`."""
        with self._lock:
            self._paused.add(component)
            self._failing_since.pop(component, None)
            self._problems.pop(component, None)

    def resume(self, check: HealthCheck) -> None:
        """Check a replaced instance again, by its new check (its new process)."""
        with self._lock:
            self.checks = [check if c.component == check.component else c for c in self.checks]
            self._paused.discard(check.component)
            self._failing_since.pop(check.component, None)
            self._problems.pop(check.component, None)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            reason = self.check_once()
            if reason:
                self.reason = reason
                self.on_fault(reason)
                return

    def start(self) -> HealthWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=CHECK_TIMEOUT_S * (len(self.checks) + 1))

    def __enter__(self) -> HealthWatch:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
