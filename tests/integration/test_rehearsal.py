"""An upgrade rehearsal end to end: the same plan on two Kubernetes versions, then their comparison."""

from __future__ import annotations

from pathlib import Path

from loadtests import results
from loadtests.binaries import cache as binaries
from loadtests.config import versions
from tests.cli import loadtest, write_tiny_plan


def test_rehearsal_runs_both_versions_and_compares(bins, tmp_path: Path) -> None:
    old, new = versions.PREVIOUS_KUBE_VERSION, versions.DEFAULT_KUBE_VERSION
    binaries.find(old)  # `make test` provides both
    # 5 s windows: what is checked is that both versions ran both steps and were compared (a page naming both,
    # its JUnit file), which a rehearsal that failed on either version, or a comparison not made, still fails
    plan = write_tiny_plan(tmp_path / "plan.yaml", "rehearsal-check", (5, 5))
    out = tmp_path / "rehearsal"
    proc = loadtest("rehearse", "--plan", str(plan), "--from", old, "--to", new, "--out", str(out), timeout=900)
    # 0: no regression, 1: regressions flagged; both are a finished rehearsal
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    for version in (old, new):
        run = results.load(out / version)
        assert run.status == "complete" and len(run.steps) == 2
        assert run.environment["versions"]["kubernetes"] == version
    compare_page = (out / "compare" / "compare.html").read_text()
    assert old in compare_page and new in compare_page
    assert (out / "compare" / "compare-junit.xml").exists()
