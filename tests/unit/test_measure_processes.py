"""ProcessSampler against real child processes that burn a known amount of CPU."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from loadtests.controlplane.processes import wait_for
from loadtests.measure.processes import HARNESS, ProcessSampler

# Waits for "go" (unless told to start at once), burns CPU until the process has used `target` seconds in all,
# says "burnt", then lives until its stdin closes.
BURNER = """
import sys, time
target, wait_for_go = float(sys.argv[1]), sys.argv[2] == "wait"
if wait_for_go:
    sys.stdin.readline()
while time.process_time() < target:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def spawn() -> Iterator[Callable[[float, bool], subprocess.Popen[str]]]:
    children: list[subprocess.Popen[str]] = []

    def start(target_cpu_s: float, wait_for_go: bool) -> subprocess.Popen[str]:
        child = subprocess.Popen([sys.executable, "-c", BURNER, str(target_cpu_s), "wait" if wait_for_go else "now"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        children.append(child)
        return child

    yield start
    for child in children:  # only the processes this test started, by their pid
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)


def wait_line(child: subprocess.Popen[str], expected: str, timeout_s: float = 60.0) -> None:
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], timeout_s)
    assert ready, f"child {child.pid} did not say {expected!r} within {timeout_s}s"
    assert child.stdout.readline().strip() == expected


def test_measures_the_cpu_a_component_burns_during_the_step(spawn) -> None:
    child = spawn(0.3, True)
    sampler = ProcessSampler({"burner": [child.pid]}, interval_s=0.05)
    sampler.start()
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    wait_line(child, "burnt")
    stats = sampler.gather()
    (stat,) = [s for s in stats if s.component == "burner"]
    # the interpreter's start-up CPU came before start() and is not counted; the burn is
    assert 0.15 <= stat.cpu_seconds <= 5.0
    assert stat.cpu_percent > 0
    assert stat.pids == [child.pid]
    assert stat.rss_end_bytes > 0
    assert stat.rss_max_bytes >= stat.rss_end_bytes
    sampler.stop()  # a second stop is harmless


def test_pids_added_after_start_and_processes_that_exit(spawn) -> None:
    sampler = ProcessSampler({}, interval_s=0.05)
    sampler.start()
    first, second = spawn(0.2, False), spawn(0.2, False)  # born after start: all their CPU is in the step
    sampler.add("loadgen", [first.pid])
    sampler.add("loadgen", [second.pid, first.pid])  # a pid given twice is counted once
    wait_line(first, "burnt")
    wait_line(second, "burnt")
    # the sampling thread saw both burns
    wait_for(lambda: sampler.cpu_seconds("loadgen") >= 0.38, 30, "both burns sampled", interval_s=0.02)
    assert first.stdin is not None
    first.stdin.close()
    first.wait(timeout=30)
    stats = {s.component: s for s in sampler.gather()}
    loadgen = stats["loadgen"]
    assert sorted(loadgen.pids) == sorted([first.pid, second.pid])
    assert loadgen.cpu_seconds >= 0.38  # the exited process still counts what was seen of it
    assert loadgen.rss_end_bytes > 0  # the second one is still alive
    assert loadgen.rss_max_bytes > loadgen.rss_end_bytes  # both were alive at some sample


def test_a_pid_that_does_not_exist_is_reported_missing() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    sampler = ProcessSampler({"ghost": [gone.pid]}, interval_s=0.05)
    sampler.start()
    assert sampler.gather() == []
    assert sampler.missing == {"ghost": [gone.pid]}


def test_gather_without_start_is_empty() -> None:
    assert ProcessSampler({"x": [1]}).gather() == []


def test_the_harness_row_is_this_process_without_its_children(spawn) -> None:
    sampler = ProcessSampler({HARNESS: [os.getpid()]}, interval_s=0.05)
    own_before = time.process_time()
    sampler.start()
    burn_until = time.process_time() + 0.3
    while time.process_time() < burn_until:  # the harness's own work
        pass
    child = spawn(1.0, False)  # a process the harness starts and reaps: its CPU is its own row's, not ours
    wait_line(child, "burnt")
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)
    assert sampler.machine_cpu_percent is None  # measured over the interval, so known only once it ends
    stats = {s.component: s for s in sampler.gather()}
    own = time.process_time() - own_before
    harness = stats[HARNESS]
    assert harness.pids == [os.getpid()]
    assert 0.25 <= harness.cpu_seconds <= own + 0.05  # what this process used, never the child's second
    assert own < 0.9  # (so a count that took in the child's CPU could not pass the line above)
    assert harness.rss_max_bytes > 0
    # the machine's CPU over the same interval covers the harness and the child it ran
    assert sampler.machine_cpu_seconds is not None and sampler.machine_cpu_percent is not None
    assert sampler.machine_cpu_seconds >= harness.cpu_seconds + 0.9
    assert sampler.machine_cpu_percent > harness.cpu_percent


def test_what_runs_after_close_is_in_no_figure() -> None:
    """A step's window closes before the harness reads its audit log and end scrapes: close() ends the interval
    there, and CPU used between close() and gather() counts for no component, nor in the interval's length."""
    sampler = ProcessSampler({HARNESS: [os.getpid()]}, interval_s=0.05)
    started_at = time.monotonic()
    sampler.start()
    burn_until = time.process_time() + 0.2
    while time.process_time() < burn_until:  # inside the window
        pass
    sampler.close()
    closed_at = time.monotonic()
    burn_until = time.process_time() + 0.6
    while time.process_time() < burn_until:  # after it
        pass
    sampler.close()  # a second close changes nothing
    (harness,) = sampler.gather()
    assert 0.15 <= harness.cpu_seconds < 0.6  # the burn after close would have taken it past 0.8
    wall = harness.cpu_seconds / (harness.cpu_percent / 100.0)
    assert wall <= closed_at - started_at  # the interval ended at close(), not at gather()
    assert sampler.gather()[0].cpu_seconds == harness.cpu_seconds
