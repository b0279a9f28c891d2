"""Running lessons in the suite: `loadtest lesson` at --scale small, each lesson once for the module that asks,
and what every run must leave behind (nothing running, no cluster folder)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psutil

from loadtests import results
from loadtests.analysis.lesson_runs import LESSON_RESULTS
from loadtests.controlplane.local import MEMORY_ROOT, clusters_root
from loadtests.report.lesson import LESSON_PAGE
from tests.cli import start_loadtest


class Lessons:
    """`loadtest lesson` runs at --scale small, one run a variant, each lesson once for the module (a few minutes
    each, so every test stays within the suite's per-test timeout); several names run in one command, as `make
    lessons` does."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.outputs: dict[str, str] = {}

    def run(self, *names: str) -> Path:
        key = "+".join(names)
        out = self.base / key
        if key not in self.outputs:
            proc = start_loadtest("lesson", *names, "--scale", "small", "--repeat", "1", "--out", str(out))
            try:
                stdout, stderr = proc.communicate(timeout=840)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            assert proc.returncode == 0, stdout[-4000:] + stderr[-4000:]
            self.outputs[key] = stdout
            assert_left_nothing(out, proc.pid)
            folders = [out] if len(names) == 1 else [out / name for name in names]
            assert all((folder / LESSON_PAGE).is_file() for folder in folders)
        return out  # one name: the lesson's folder; several: a folder of them (OUT/<name>/)


def assert_left_nothing(out: Path, pid: int) -> None:
    """No cluster folder of the command, no etcd data left in memory, no process still using its folder."""
    assert [p for p in clusters_root().glob(f"run-*-{pid}") if p.exists()] == []
    assert list(MEMORY_ROOT.glob(f"k8s-loadtest-run-*-{pid}-*")) == []
    strays = [p.info["pid"] for p in psutil.process_iter(["pid", "cmdline"])
              if any(str(out) in part for part in (p.info["cmdline"] or []))]
    assert strays == []


def lesson_summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / LESSON_RESULTS).read_text())


def comparisons(folder: Path, measure: str) -> list[dict[str, Any]]:
    return [c for c in lesson_summary(folder)["comparisons"] if c["measure"] == measure]


def last_step(folder: Path, variant: str) -> results.StepResult:
    run = results.load(folder / variant)
    assert run.status == "complete", run.error
    return run.steps[-1]
