"""Running lessons in the suite: `loadtest lesson` at --scale small, each lesson once for the module that asks,
and what every run must leave behind (nothing running, no cluster folder). A test may run a copy of a bundled
lesson whose windows are only as long as its assertions need (Lessons.shortened): the bundled lesson, and what
it measures for its users, stays as it is."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psutil
import yaml

from loadtests import results
from loadtests.analysis.lesson_runs import LESSON_RESULTS
from loadtests.config.lesson import LESSONS_DIR, deep_merge
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

    def run(self, *lessons: str | Path) -> Path:
        """Bundled lessons by name, or copies of them (their files, from `shortened`), in one command."""
        names = [Path(lesson).stem for lesson in lessons]  # a copy's file is named after its lesson
        key = "+".join(names)
        out = self.base / key
        if key not in self.outputs:
            proc = start_loadtest("lesson", *map(str, lessons), "--scale", "small", "--repeat", "1", "--out",
                                  str(out))
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

    def shortened(self, name: str, step: dict[str, Any], base: dict[str, Any] | None = None,
                  variants: dict[str, dict[str, Any]] | None = None) -> Path:
        """A copy of bundled lesson `name` for one test: `step` merged into each of its small steps (a window and
        a warm-up as short as the test's assertions need), `base` into its base plan, and `variants` into the
        variants it names; the copy's file, named after the lesson, is what `run` is given."""
        data = yaml.safe_load((LESSONS_DIR / f"{name}.yaml").read_text())
        small = data["scales"]["small"]
        small["steps"] = [deep_merge(found, step) for found in small["steps"]]
        data["base"] = deep_merge(data["base"], base or {})
        data["variants"] = [deep_merge(variant, (variants or {}).get(variant["name"], {}))
                            for variant in data["variants"]]
        path = self.base / "shortened" / f"{name}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path


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
