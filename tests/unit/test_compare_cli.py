"""`loadtest compare` as a user runs it: exit codes, and thresholds from the plan and from flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.recorded import raw_run_folder
from loadtests.analysis.noise import NOISE_FLOOR_ENV
from tests.cli import REPO, error_lines, loadtest
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


def test_compare_of_report_pages_says_what_compare_of_their_folders_says(tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    b = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    floor = {NOISE_FLOOR_ENV: str(floor_file(tmp_path / "floor"))}
    for folder in (a, b):
        assert loadtest("report", str(folder)).returncode == 0
    folders = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "out"), env=floor)
    pages = loadtest("compare", str(a / "report.html"), str(b / "report.html"), "--out", str(tmp_path / "out"),
                     env=floor)
    assert folders.returncode == pages.returncode == 1
    assert pages.stdout == folders.stdout and "REGRESSION  step" in pages.stdout


def test_a_run_folder_is_rebuilt_from_its_report_page(tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    assert loadtest("report", str(a)).returncode == 0
    rebuilt = loadtest("report", "--from", str(a / "report.html"), str(tmp_path / "again"))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (tmp_path / "again" / "report.html").is_file()
    same = loadtest("compare", str(a), str(tmp_path / "again"), "--out", str(tmp_path / "cmp"))
    assert same.returncode == 0 and "CHANGED" not in same.stdout and "no regression" in same.stdout
    again = loadtest("report", "--from", str(a / "report.html"), str(tmp_path / "again"))
    assert again.returncode == 2
    assert len(error_lines(again)) == 1 and "already holds a results.json" in again.stderr


RAW = REPO / "benchmarks" / "results" / "raw"


def test_single_runs_of_the_default_plan_are_gated_on_its_own_recorded_floor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan `make load-test` runs: a copy with every latency tripled is a regression (exit 1) against the
    floor shipped for it, and another run of the same build, one the floor was not measured on (the noise runs'
    repeat-2, left out of it), is not (exit 0)."""
    monkeypatch.delenv(NOISE_FLOOR_ENV, raising=False)  # the floors shipped in loadtests/data
    first = raw_run_folder(RAW / "noise_floor" / "default" / "repeat-1.results.json.gz", tmp_path / "a")
    another = raw_run_folder(RAW / "noise_floor" / "default" / "left-out" / "repeat-2.results.json.gz", tmp_path / "b")
    same = loadtest("compare", str(first), str(another), "--out", str(tmp_path / "same"))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "weighed against the recorded noise (single runs)" in same.stdout
    assert "runs of plan default" in same.stdout
    tripled = raw_run_folder(RAW / "noise_floor" / "default" / "repeat-1.results.json.gz", tmp_path / "c",
                        scale_latencies(3.0))
    worse = loadtest("compare", str(first), str(tripled), "--out", str(tmp_path / "worse"))
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "REGRESSION  step" in worse.stdout
