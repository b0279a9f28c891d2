"""`loadtest run --repeat 3`: three runs on fresh control planes into one folder, a report over them, and a
comparison of the folder with itself that finds no regression."""

from __future__ import annotations

from pathlib import Path

from loadtests import results
from tests.cli import loadtest, write_tiny_plan


def test_repeated_tiny_plan_end_to_end(bins, tmp_path: Path) -> None:
    plan = write_tiny_plan(tmp_path / "plan.yaml", "repeated", (5, 5))
    out = tmp_path / "out"
    run = loadtest("run", "--plan", str(plan), "--out", str(out), "--repeat", "3", "--no-gate", timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for k in (1, 2, 3):
        repeat = results.load(out / f"repeat-{k}")
        assert repeat.status == "complete" and [s.nodes for s in repeat.steps] == [5, 10]
        assert (out / f"repeat-{k}" / "report.html").exists()
    page = (out / "report.html").read_text()
    assert "repeat-1/report.html" in page and "repeat-3/report.html" in page
    assert (out / "junit.xml").exists()
    same = loadtest("compare", str(out), str(out), "--out", str(tmp_path / "self"))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "REGRESSION" not in same.stdout
