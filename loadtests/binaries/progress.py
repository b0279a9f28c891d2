"""What a long Go build prints while it runs: packages compiled of those to compile, elapsed, an estimate
of what is left; without these lines setup looks hung."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROGRESS_INTERVAL_S = 12.0


_MIN_DONE_FOR_ESTIMATE = 20  # below this (or 2% of the total) the pace says little: the first packages are small


PACKAGE_LINE = re.compile(r"[\w.~+-]+(/[\w.~+-]+)*")  # what `go build -v` prints per package, when go list failed


_IN_BUILD_CACHE = "not installed but available in build cache"  # a `go list` StaleReason: nothing to compile


@dataclass(frozen=True)
class BuildScope:
    """What `go list -deps` says a build involves: every package, and how many of them need compiling."""

    packages: frozenset[str]
    to_compile: int  # an upper bound: a package stale only through a dependency may still come from the cache


def parse_go_list(output: str) -> BuildScope:
    """Read `go list -deps -f '{{.ImportPath}}\\t{{.Stale}}\\t{{.StaleReason}}'` output."""
    packages, to_compile = set(), 0
    for line in output.splitlines():
        path, _, rest = line.partition("\t")
        if not path.strip():
            continue
        packages.add(path.strip())
        stale, _, reason = rest.partition("\t")
        if stale.strip() == "true" and reason.strip() != _IN_BUILD_CACHE:
            to_compile += 1
    return BuildScope(frozenset(packages), to_compile)


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def estimate_remaining_s(done: int, total: int | None, elapsed_s: float) -> float | None:
    """Seconds left if the rest compiles at the pace so far; None while the pace means nothing yet."""
    if not total or done >= total or elapsed_s <= 0 or done < max(_MIN_DONE_FOR_ESTIMATE, total // 50):
        return None
    return elapsed_s / done * (total - done)


def progress_line(label: str, done: int, total: int | None, elapsed_s: float) -> str:
    """One line of build progress: packages compiled so far, time spent, and roughly how long is left."""
    elapsed = format_duration(elapsed_s)
    if total is None:
        return f"{label}: {done} packages compiled, {elapsed} elapsed"
    if done >= total:
        return f"{label}: {done} packages compiled, {elapsed} elapsed; linking"
    share = f"{done}/{total} packages compiled ({100 * done // total}%), {elapsed} elapsed"
    remaining = estimate_remaining_s(done, total, elapsed_s)
    if remaining is None:
        left = "estimating time left"
    else:
        left = "almost done" if remaining < 5 else f"about {format_duration(remaining)} left"
    return f"{label}: {share}, {left}"


def scope_line(label: str, scope: BuildScope | None) -> str:
    """The line before a build: how much of it needs compiling (the rest is in Go's build cache)."""
    if scope is None:
        return f"{label}: compiling (package count unknown)"
    cached = len(scope.packages) - scope.to_compile
    if scope.to_compile == 0:
        return f"{label}: all {len(scope.packages)} packages are in Go's build cache; linking only"
    return (f"{label}: up to {scope.to_compile} of {len(scope.packages)} packages to compile "
            f"({cached} in Go's build cache); progress every {PROGRESS_INTERVAL_S:.0f} s")


def run_counting(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    counts: Callable[[str], bool],
    tick: Callable[[int, float], None],
    interval_s: float = PROGRESS_INTERVAL_S,
) -> tuple[int, list[str]]:
    """Run argv, counting output lines that `counts` accepts and calling tick(count, elapsed) every interval_s.

    Returns the exit code and the last lines that were not counted (the ones worth showing on failure).
    """
    started = time.monotonic()
    done = 0
    others: deque[str] = deque(maxlen=40)
    proc = subprocess.Popen(  # noqa: S603 - argv built here from fixed tool names
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace",
        start_new_session=True,  # its own process group, so an interrupt can stop the compilers go started too
    )

    def read() -> None:
        nonlocal done
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            if counts(line):
                done += 1
            elif line.strip():
                others.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while True:
            try:
                proc.wait(timeout=interval_s)
                break
            except subprocess.TimeoutExpired:
                tick(done, time.monotonic() - started)
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM): leave no compiler running
            _stop_group(proc)
        reader.join(timeout=5)
    return proc.returncode, list(others)


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """Stop a child started in its own session and everything in its process group: politely, then for sure."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue
