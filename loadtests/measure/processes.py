"""CPU and memory per component over a step, sampled with psutil in a background thread.

CPU comes from the kernel's cumulative counters (exact, whatever the interval); memory needs sampling, so
RSS is the maximum over samples. A component is a group of pids (e.g. the load generator's master and
workers) and is reported as one figure, because that is the unit a reader compares against a core count.

The harness's own process is a component too ("harness"): it runs the probes, the health sampler, the audit
reader and the node join, so its CPU is part of the machine's and can be the limit. Only its own CPU is counted
(cpu_times user + system, never the children's fields): the processes it starts (Locust, a local control
plane) are rows of their own.
The whole machine's CPU is read over the same interval, so the rows and the machine's total can be set side by
side and what no row covers ("other processes") shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import psutil

from loadtests.controlplane.processes import started_since_boot
from loadtests.results.processes import CPU_BOUND_PERCENT, ProcessStat

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
HARNESS = "harness"  # the component name of the harness's own process (this one)


def harness_limit(cpu_percent: float | None, over: str) -> str | None:
    """A sentence when the harness ran at its limit (one Python process: one core, the load generator's
    threshold), else None; `over` says the interval ("the step", "the ramp")."""
    if cpu_percent is None or cpu_percent < CPU_BOUND_PERCENT:
        return None
    return (f"harness at its CPU limit: {cpu_percent:.0f} % of one core over {over} (one Python process; "
            f"limit {CPU_BOUND_PERCENT:.0f} %): what it drives and times itself (node creation and join, "
            "pod startup, watch delay, health samples) may show the harness's pace, not the control plane's")


def harness_note(stats: Iterable[ProcessStat]) -> str | None:
    """The step's note when the harness's recorded CPU reached its limit (None: below it, or not recorded)."""
    found = [s.cpu_percent for s in stats if s.component == HARNESS]
    return harness_limit(sum(found), "the step") if found else None


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, iowait) CPU seconds of the whole machine so far, summed over its cores (guest time is inside user)."""
    times = psutil.cpu_times()
    busy = sum(getattr(times, part, 0.0) for part in ("user", "nice", "system", "irq", "softirq", "steal"))
    return busy, getattr(times, "iowait", 0.0)


def _machine_busy_s() -> float:
    return machine_busy_seconds()[0]


@dataclass
class _Tracked:
    component: str
    pid: int
    process: psutil.Process
    base_cpu: float  # CPU seconds already used before the step (0 for a process started during it)
    last_cpu: float  # CPU seconds at the last successful sample: what a process that exits leaves behind
    alive: bool = True


@dataclass
class _Component:
    rss_max: int = 0
    rss_end: int = 0
    tracked: list[_Tracked] = field(default_factory=list)


TICK_S = 0.01  # the kernel's clock tick, in which /proc/<pid>/stat says when a process started


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


class ProcessSampler:
    """Samples every pid of every component each `interval_s` between start() and gather()."""

    def __init__(self, pids_by_component: Mapping[str, Iterable[int]], interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._components: dict[str, _Component] = {}
        self.missing: dict[str, list[int]] = {}  # pids that did not exist when they were added
        self._pending = {component: list(pids) for component, pids in pids_by_component.items()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_mono: float | None = None
        self._started_wall: float | None = None
        self._started_boot: float | None = None  # seconds since boot at start() (Linux), see _born_since_start
        self._machine_start_s: float | None = None
        self._closed: tuple[float, float] | None = None  # (monotonic time, machine busy seconds) at close()
        # the whole machine's busy CPU (all cores) over the same interval as the components; None until gather()
        self.machine_cpu_seconds: float | None = None
        self.machine_cpu_percent: float | None = None

    def start(self, *, background: bool = True) -> None:
        """Count from now; `background` samples every interval_s in a thread (else only when asked)."""
        self._started_mono = time.monotonic()
        self._started_wall = time.time()
        clock = getattr(time, "CLOCK_BOOTTIME", None)  # Linux: the clock /proc/<pid>/stat counts starts on
        self._started_boot = time.clock_gettime(clock) if clock is not None else None
        self._machine_start_s = _machine_busy_s()
        pending, self._pending = self._pending, {}
        for component, pids in pending.items():
            self.add(component, pids)
        self.sample()
        if background:
            self._thread = threading.Thread(target=self._run, name="process-sampler", daemon=True)
            self._thread.start()

    def add(self, component: str, pids: Iterable[int]) -> None:
        """Track more pids (e.g. the load generator, which starts after the probes)."""
        if self._started_wall is None:
            self._pending.setdefault(component, []).extend(pids)
            return
        with self._lock:
            entry = self._components.setdefault(component, _Component())
            known = {t.pid for t in entry.tracked}
            for pid in pids:
                if pid in known:
                    continue
                known.add(pid)
                try:
                    process = psutil.Process(pid)
                    with process.oneshot():
                        cpu = _cpu_seconds(process)
                        created, since_boot = process.create_time(), started_since_boot(process)
                except _GONE:
                    self.missing.setdefault(component, []).append(pid)
                    continue
                # a process born during the step spent all its CPU in the step
                base = 0.0 if self._born_since_start(created, since_boot) else cpu
                entry.tracked.append(_Tracked(component, pid, process, base_cpu=base, last_cpu=cpu))

    def _born_since_start(self, created: float, since_boot: float) -> bool:
        """Whether a process started after start(). psutil's create_time is boot time (whole seconds, from
        /proc/stat) plus the start in clock ticks, so against time.time() it can be off by up to a second;
        since boot, both sides are on the kernel's own clock, to its 10 ms tick (a process started within one
        tick of start() counts as born in the step: it cannot have used CPU before it)."""
        if self._started_boot is None:
            return created >= (self._started_wall or 0.0)
        return since_boot >= self._started_boot - TICK_S

    def sample(self) -> None:
        """Take one sample now (the thread calls this; tests and gather() too)."""
        with self._lock:
            for entry in self._components.values():
                rss = 0
                for tracked in entry.tracked:
                    if not tracked.alive:
                        continue
                    try:
                        with tracked.process.oneshot():
                            tracked.last_cpu = _cpu_seconds(tracked.process)
                            rss += tracked.process.memory_info().rss
                    except _GONE:
                        tracked.alive = False
                entry.rss_end = rss
                entry.rss_max = max(entry.rss_max, rss)

    def cpu_seconds(self, component: str) -> float:
        """CPU seconds seen so far for one component (as of the last sample)."""
        with self._lock:
            entry = self._components.get(component)
            return sum(t.last_cpu - t.base_cpu for t in entry.tracked) if entry else 0.0

    def components(self) -> list[str]:
        with self._lock:
            return list(self._components)

    def rss_now(self) -> dict[str, int]:
        """Each component's resident memory at the last sample (its live processes together)."""
        with self._lock:
            return {name: entry.rss_end for name, entry in self._components.items() if entry.tracked}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> None:
        """Stop the sampling thread; safe to call more than once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            self._thread = None

    def close(self) -> None:
        """End the measured interval now: stop, take the last sample; gather() reports up to here, whatever runs
        in between (a step's window closes here, and the harness's reading of its audit log and end scrapes
        after it is no figure's load). Safe to call again: the first close counts."""
        self.stop()
        if self._started_mono is None or self._closed is not None:
            return
        self.sample()
        self._closed = (time.monotonic(), _machine_busy_s())

    def gather(self) -> list[ProcessStat]:
        """Close (unless closed), and report one ProcessStat per component that had a process."""
        self.close()
        if self._started_mono is None or self._closed is None:
            return []
        closed_mono, machine_end_s = self._closed
        wall = max(closed_mono - self._started_mono, 1e-9)
        if self._machine_start_s is not None:
            self.machine_cpu_seconds = max(0.0, machine_end_s - self._machine_start_s)
            self.machine_cpu_percent = self.machine_cpu_seconds / wall * 100.0
        out: list[ProcessStat] = []
        with self._lock:
            for component, entry in self._components.items():
                if not entry.tracked:
                    continue
                cpu = sum(max(0.0, t.last_cpu - t.base_cpu) for t in entry.tracked)
                out.append(ProcessStat(component=component, cpu_percent=cpu / wall * 100.0, cpu_seconds=cpu,
                                       rss_max_bytes=entry.rss_max, rss_end_bytes=entry.rss_end,
                                       pids=[t.pid for t in entry.tracked]))
        return out


class CpuMeter:
    """CPU of the machine and of each component over each interval, in % of one core (as ProcessStat): the
    same per-process counters as a step's ProcessSampler (a process that exits keeps what it used, one added
    later counts from when it is added), read as rates between two readings."""

    MIN_INTERVAL_S = 1.0

    def __init__(self, pids: Mapping[str, Iterable[int]]) -> None:
        self._sampler = ProcessSampler(pids)
        self._sampler.start(background=False)
        self._previous: tuple[float, dict[str, float]] | None = None
        self.first: tuple[float, float] | None = None  # (time, machine busy seconds) at the first reading
        self.last: tuple[float, float] | None = None

    def add(self, component: str, pids: Iterable[int]) -> None:
        self._sampler.add(component, pids)

    def read(self) -> dict[str, float | None]:
        """CPU since the previous reading; None at the first one, and over less than MIN_INTERVAL_S (a final
        sample right after the last one would show a burst of a fraction of a second as the step's peak)."""
        now = time.monotonic()
        busy, iowait = machine_busy_seconds()
        self._sampler.sample()
        totals = {"machine": busy, "iowait": iowait}
        for component in self._sampler.components():
            totals[component] = self._sampler.cpu_seconds(component)
        if self.first is None:
            self.first = (now, busy)
        self.last = (now, busy)
        previous = self._previous
        if previous is None or now - previous[0] < self.MIN_INTERVAL_S:
            self._previous = previous or (now, totals)
            return {f"cpu.{name}": None for name in totals}
        self._previous = (now, totals)
        wall = now - previous[0]
        return {f"cpu.{name}": round(max(0.0, value - previous[1].get(name, value)) / wall * 100.0, 1)
                for name, value in totals.items()}

    def rss(self) -> dict[str, int]:
        """Each component's resident memory as of the last read()."""
        return self._sampler.rss_now()

    def average(self) -> float | None:
        """The machine's CPU over the whole window, in % of one core."""
        if self.first is None or self.last is None or self.last[0] <= self.first[0]:
            return None
        return round((self.last[1] - self.first[1]) / (self.last[0] - self.first[0]) * 100.0, 1)


def peak_rss_bytes(pid: int) -> int | None:
    """A process's peak resident set since it started, as the kernel keeps it (VmHWM in /proc/<pid>/status, Linux):
    exact, where sampling RSS can fall between the peaks. None when the process or the field is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # the kernel writes it in kB
    except (OSError, ValueError, IndexError):
        return None
    return None
