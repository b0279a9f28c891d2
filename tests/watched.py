"""A `loadtest run` in the background, watched from outside as a user (or a CI runner) would: its output
lines, its cluster's processes, its exit; for tests that inject faults into it while it runs."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO

import psutil

from loadtests import results
from loadtests.controlplane.processes import ProcessRecord, wait_for
from tests.cli import private_cache, start_loadtest, write_tiny_plan


class WatchedRun:
    """A `loadtest run` of the tiny plan, watched from outside: its output lines, its cluster's processes."""

    def __init__(self, tmp_path: Path, *, plan: Path | None = None, out: Path | None = None,
                 second_nodes: int = 10, durations_s: tuple[float, float] = (3, 30),
                 command: tuple[str, ...] = ("run",)) -> None:
        """`loadtest run` (or `command`, e.g. ("capacity", "--max-nodes", "40")) of the given plan, or of the
        tiny two-step one (its health timeout 15 s, its second step of `second_nodes`).

        The tiny plan's first step only has to finish and be saved before a test's fault comes in the second
        (which a test checks: the saved step, its 5 nodes): 3 s of window do that as 8 s did, 5 s sooner. The
        second step is long enough for the fault to land inside it.

        The run keeps its cluster in a cache folder of its own (`env` names it for later commands), so a folder a
        killed run leaves there on purpose is never another test's "stale cluster" warning."""
        plan = plan or write_tiny_plan(tmp_path / "fault.yaml", "fault", durations_s, second_nodes=second_nodes,
                                       unresponsive_s=15)
        self.out = out or tmp_path / "run"
        cache = tmp_path / "cache"
        self.env = private_cache(cache)
        self.proc = start_loadtest(*command, "--out", str(self.out), "--plan", str(plan), env=self.env)
        self.state_file = cache / "clusters" / f"run-{self.out.name}-{self.proc.pid}" / "state.json"
        self.lines: list[str] = []
        self.err_lines: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.err_lines))]
        for reader in self._readers:
            reader.start()
        self.seen: list[ProcessRecord | psutil.Process] = []

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        assert stream is not None
        for line in stream:
            into.append(line.rstrip("\n"))

    @property
    def stdout(self) -> str:
        return "\n".join(self.lines)

    @property
    def stderr(self) -> str:
        return "\n".join(self.err_lines)

    def _exited(self) -> str | None:
        return None if self.proc.poll() is None else f"run exited early:\n{self.stdout[-2000:]}"

    def wait_line(self, text: str, timeout_s: float = 300) -> None:
        wait_for(lambda: any(text in line for line in self.lines), timeout_s, f"output line {text!r}",
                 interval_s=0.05, abort=self._exited)

    def wait_second_step_loaded(self) -> None:
        def loaded() -> bool:
            try:
                return len(results.load(self.out).steps) == 1 and (self.out / "step-2" / "locust.log").exists()
            except (OSError, ValueError):
                return False

        wait_for(loaded, 300, "step 1 saved and step 2 under load", abort=self._exited)

    def records(self) -> list[ProcessRecord]:
        """The cluster's processes (and, remembered for the final check, the run's other children)."""
        records = [ProcessRecord(**p) for p in json.loads(self.state_file.read_text())["processes"]]
        self.seen = [*records, *psutil.Process(self.proc.pid).children(recursive=True)]
        return records

    def component(self, name: str) -> ProcessRecord:
        return next(r for r in self.records() if r.component == name)

    def finish(self, timeout_s: float = 180) -> int:
        try:
            self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)
        for reader in self._readers:
            reader.join(timeout=10)
        return self.proc.returncode

    def errors(self) -> list[str]:
        return [line for line in (self.stdout + "\n" + self.stderr).splitlines() if line.startswith("loadtest:")]
