"""CPU and memory per component over a step, sampled with psutil in a background thread.

CPU comes from the kernel's cumulative counters (exact, whatever the interval); memory needs sampling, so
RSS is the maximum over samples. A component is a group of pids (e.g. the load generator's master and
workers) and is reported as one figure, because that is the unit a reader compares against a core count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import psutil

from loadtests.results import ProcessStat

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)


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

    def start(self) -> None:
        self._started_mono = time.monotonic()
        self._started_wall = time.time()
        pending, self._pending = self._pending, {}
        for component, pids in pending.items():
            self.add(component, pids)
        self.sample()
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
                        created = process.create_time()
                except _GONE:
                    self.missing.setdefault(component, []).append(pid)
                    continue
                # a process born during the step spent all its CPU in the step
                base = 0.0 if created >= self._started_wall else cpu
                entry.tracked.append(_Tracked(component, pid, process, base_cpu=base, last_cpu=cpu))

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

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> None:
        """Stop the sampling thread; safe to call more than once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            self._thread = None

    def gather(self) -> list[ProcessStat]:
        """Stop, take a last sample, and report one ProcessStat per component that had a process."""
        self.stop()
        if self._started_mono is None:
            return []
        self.sample()
        wall = max(time.monotonic() - self._started_mono, 1e-9)
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
