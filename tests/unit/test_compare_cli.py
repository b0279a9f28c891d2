"""`loadtest compare` as a user runs it: exit codes, and thresholds from the plan and from flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadtests.analysis.noise import NOISE_FLOOR_ENV
from tests.cli import error_lines, loadtest
from tests.unit.noisedata import floor_file
from tests.unit.reportdata import SAMPLE, copy_run, edited_run, scale_latencies


def _lenient(data: dict[str, Any]) -> None:
    scale_latencies(3.0)(data)
    data["plan"]["compare"] = {"latency_pct": 500}


def test_exit_codes_follow_the_verdict(tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    same = loadtest("compare", str(a), str(a), "--out", str(tmp_path / "same"))
    assert same.returncode == 0, same.stdout + same.stderr
    slower = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    # one run a side: a regression only beyond the figures' recorded run-to-run noise
    floor = {NOISE_FLOOR_ENV: str(floor_file(tmp_path / "floor"))}
    worse = loadtest("compare", str(a), str(slower), "--out", str(tmp_path / "worse"), env=floor)
    assert worse.returncode == 1
    assert "REGRESSION  step" in worse.stdout
    assert (tmp_path / "worse" / "compare.html").exists()


def test_plan_thresholds_apply_and_flags_override_them(tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    lenient = edited_run(SAMPLE, tmp_path / "b", _lenient)
    floor = {NOISE_FLOOR_ENV: str(floor_file(tmp_path / "floor"))}
    by_plan = loadtest("compare", str(a), str(lenient), "--out", str(tmp_path / "plan"), env=floor)
    assert by_plan.returncode == 0, by_plan.stdout
    by_flag = loadtest("compare", str(a), str(lenient), "--out", str(tmp_path / "flag"), "--threshold",
                       "latency_pct=25", env=floor)
    assert by_flag.returncode == 1


def test_bad_threshold_flag_is_one_line(tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    result = loadtest("compare", str(a), str(a), "--threshold", "latency_pct=lots")
    assert result.returncode == 2
    assert len(error_lines(result)) == 1 and "KEY=NUMBER" in result.stderr
