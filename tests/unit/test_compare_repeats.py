"""Noise-aware comparison of repeated runs: medians, Mann-Whitney U, "~", and the sides a user can name."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from loadtests.analysis.noise import NOISE_FLOOR_ENV, NoiseFloor
from loadtests.config import plan as plan_mod
from loadtests.errors import CompareError
from loadtests.report.compare import compare
from tests.cli import error_lines, loadtest
from tests.unit.noisedata import WIDE_NOISE_RUNS, floor_file, recorded_floor
from tests.unit.reportdata import SAMPLE, copy_run, edited_run, repeated_run, scale_latencies

NOISE_A = (0.97, 0.99, 1.01, 1.03)
NOISE_B = (0.98, 1.0, 1.02, 1.04)  # interleaved with A: noise only
SLOWER = tuple(3 * f for f in NOISE_A)  # every latency tripled: fully separated from A
# medians 1.5 and 1.975 (+32 %, past the 25 % latency threshold), but the runs interleave: p = 0.686
WIDE_A = (0.9, 1.0, 2.0, 2.1)
WIDE_B = (0.95, 1.9, 2.05, 2.2)


GOOD_PLAN = {
    "name": "t",
    "steps": [{"nodes": 10, "pods_per_node": 1, "duration_s": 5}],
    "load": {"scenarios": {"pod_churn": {"rate": 2}}},
}


def other_plan(data: dict[str, Any]) -> None:
    data["plan"]["load"]["pod_churn"]["rate"] = 10.0


def test_noise_only_is_no_regression_and_marked_not_significant(tmp_path: Path) -> None:
    """(a) two repeated sides that differ only by noise."""
    a = repeated_run(tmp_path / "a", NOISE_A)
    b = repeated_run(tmp_path / "b", NOISE_B)
    result = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "~ (no significant difference, alpha 0.05)" in result.stdout
    assert "noise-checked: medians of 4 (A) and 4 (B) runs" in result.stdout
    assert "not noise-checked" not in result.stdout
    html = (tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    assert "± 3 %" in html and "p=0.686" in html


def test_past_the_threshold_but_within_the_noise_is_marked_not_flagged(tmp_path: Path) -> None:
    a = repeated_run(tmp_path / "a", WIDE_A)
    b = repeated_run(tmp_path / "b", WIDE_B)
    result = compare(a, b, tmp_path / "out")
    assert result.passed
    unsure = {(r.step_index, r.label) for r in result.not_significant}
    assert (0, "pod startup p99") in unsure
    row = next(r for r in result.rows if r.step_index == 0 and r.label == "pod startup p99")
    assert row.past_threshold and not row.regression
    assert row.mark == "~" and row.status == "~"
    assert row.a == pytest.approx(2.4 * 1.5) and row.b == pytest.approx(2.4 * 1.975)
    assert row.p_value == pytest.approx(48 / 70)
    # the same medians as single runs: a regression beyond a recorded floor of +23 % ...
    a1 = copy_run(a / "repeat-1", tmp_path / "a1")
    b1 = edited_run(SAMPLE, tmp_path / "b1", scale_latencies(1.975 / 1.5 * 0.9))
    single = compare(a1, b1, tmp_path / "out1", noise_floor=recorded_floor(tmp_path / "noise"))
    assert not single.passed
    # ... and with no recorded noise a change, not noise-checked, not a regression
    unrecorded = compare(a1, b1, tmp_path / "out2", noise_floor=NoiseFloor())
    assert unrecorded.passed and unrecorded.label == "CHANGES"
    cli = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "cli"))
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "~           step 100 nodes: pod startup p99: A 3.6" in cli.stdout
    assert "p=0.686" in cli.stdout and "but no significant difference (alpha 0.05)" in cli.stdout


def test_a_slowed_side_regresses_with_its_p_value(tmp_path: Path) -> None:
    """(b) the same sides with one slowed three times."""
    a = repeated_run(tmp_path / "a", NOISE_A)
    b = repeated_run(tmp_path / "b", SLOWER)
    result = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("REGRESSION  step")]
    assert lines and all("p=0.029" in line and "(n=4)" in line for line in lines)
    assert any("pod startup p99" in line for line in lines)
    root = ET.parse(tmp_path / "out" / "compare-junit.xml").getroot()
    failures = [f.get("message") for f in root.iter("failure")]
    assert failures and all("p=0.029" in message for message in failures)
    assert root.find(".//property[@name='a_runs']").get("value") == "4"
    html = (tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    assert "REGRESSION" in html and "p=0.029" in html


def test_with_an_alpha_below_every_reachable_p_the_same_change_is_not_significant(tmp_path: Path) -> None:
    a = repeated_run(tmp_path / "a", NOISE_A)
    b = repeated_run(tmp_path / "b", SLOWER)
    strict = compare(a, b, tmp_path / "out", thresholds={"alpha": 0.01}, noise_floor=NoiseFloor())
    assert strict.noise.startswith("verdicts not noise-checked (4 vs 4 runs can never reach p < 0.01)")
    assert strict.passed and strict.unchecked_changes  # nothing weighs the noise: changes, never a regression
    floored = compare(a, b, tmp_path / "floored", thresholds={"alpha": 0.01},
                      noise_floor=recorded_floor(tmp_path / "noise"))
    assert not floored.passed  # tripled medians, beyond the recorded floor of +23 %
    assert floored.noise.startswith("verdicts weighed against the recorded noise (4 vs 4 runs can never reach")
    cli = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "cli"), "--alpha", "0.2")
    assert cli.returncode == 1 and "alpha 0.2" in cli.stdout


def test_a_plan_sets_alpha_and_the_flag_overrides_it(tmp_path: Path) -> None:
    def lenient(data: dict[str, Any]) -> None:
        data["plan"]["compare"] = {"alpha": 0.2}

    assert plan_mod.parse({**GOOD_PLAN, "compare": {"alpha": 0.2}}, "t.yaml").compare == {"alpha": 0.2}
    a = repeated_run(tmp_path / "a", NOISE_A[:3])
    b = repeated_run(tmp_path / "b", SLOWER[:3], lenient)  # B's plan: 3 vs 3 can reach p = 0.1 < 0.2
    by_plan = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "plan"))
    assert by_plan.returncode == 1, by_plan.stdout + by_plan.stderr
    assert "noise-checked: medians of 3 (A) and 3 (B) runs" in by_plan.stdout and "p=0.100" in by_plan.stdout
    by_flag = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "flag"), "--alpha", "0.05",
                       env={NOISE_FLOOR_ENV: str(tmp_path / "none.json")})
    assert by_flag.returncode == 2 and "noise floor" in by_flag.stderr  # a named file that is not there: one line
    (tmp_path / "none.json").write_text('{"figures": {}}')
    by_flag = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "flag"), "--alpha", "0.05",
                       env={NOISE_FLOOR_ENV: str(tmp_path / "none.json")})
    assert by_flag.returncode == 0, by_flag.stdout + by_flag.stderr
    assert "verdicts not noise-checked (3 vs 3 runs can never reach p < 0.05)" in by_flag.stdout
    assert "CHANGED     step" in by_flag.stdout and "changes, not noise-checked" in by_flag.stdout


def test_three_runs_a_side_cannot_reach_significance_so_the_noise_floor_decides(tmp_path: Path) -> None:
    a = repeated_run(tmp_path / "a", NOISE_A[:3])
    b = repeated_run(tmp_path / "b", SLOWER[:3])
    result = compare(a, b, tmp_path / "out", noise_floor=recorded_floor(tmp_path / "noise"))
    assert not result.passed
    assert "3 vs 3 runs can never reach p < 0.05" in result.noise
    assert "loadtest run --repeat 4" in result.noise
    assert all(r.p_value == pytest.approx(0.1) for r in result.regressions)
    assert all("beyond the recorded noise" in r.describe() for r in result.regressions)
    unrecorded = compare(a, b, tmp_path / "out2", noise_floor=NoiseFloor())
    assert unrecorded.passed and unrecorded.regressions == []
    assert all("not noise-checked" in r.describe() for r in unrecorded.unchecked_changes)


def test_single_runs_without_a_recorded_noise_show_changes_not_regressions(tmp_path: Path) -> None:
    """(c) single runs, no recorded noise floor: changes, said to be not noise-checked in every output, exit 0."""
    a = copy_run(SAMPLE, tmp_path / "a")
    b = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    empty = tmp_path / "empty.json"
    empty.write_text('{"note": "none yet", "figures": {}}')
    result = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "out"), env={NOISE_FLOOR_ENV: str(empty)})
    assert result.returncode == 0, result.stdout + result.stderr
    noted = [line for line in result.stdout.splitlines() if "not noise-checked" in line]
    assert any(line.startswith("verdicts not noise-checked (single runs)") for line in noted)
    assert "REGRESSION" not in result.stdout and "p=" not in result.stdout
    assert "CHANGED     step" in result.stdout and "changes, not noise-checked" in result.stdout
    html = (tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    assert "verdicts not noise-checked (single runs)" in html and ">CHANGES<" in html
    root = ET.parse(tmp_path / "out" / "compare-junit.xml").getroot()
    assert root.get("failures") == "0"
    assert "not noise-checked (single runs)" in root.find(".//property[@name='noise']").get("value")


def test_single_runs_regress_only_beyond_the_recorded_noise(tmp_path: Path) -> None:
    """(c) single runs with a recorded noise floor: the verdict says which measurement it weighed."""
    a = copy_run(SAMPLE, tmp_path / "a")
    b = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    recorded = floor_file(tmp_path / "floor")
    result = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "out"), env={NOISE_FLOOR_ENV: str(recorded)})
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("REGRESSION  step")]
    floor = "beyond the recorded noise: a second run up to +23 % above a first at"
    assert lines and all(floor in line for line in lines)
    assert "verdicts weighed against the recorded noise (single runs)" in result.stdout
    assert str(recorded) in result.stdout  # which measurement
    root = ET.parse(tmp_path / "out" / "compare-junit.xml").getroot()
    assert str(recorded) in root.find(".//property[@name='noise_floor']").get("value")
    # past the threshold (+40 %) but within a recorded floor of +68 %: "~", exit 0
    wide = floor_file(tmp_path / "wide", WIDE_NOISE_RUNS)
    near = edited_run(SAMPLE, tmp_path / "near", scale_latencies(1.4))
    within = loadtest("compare", str(a), str(near), "--out", str(tmp_path / "near-out"),
                      env={NOISE_FLOOR_ENV: str(wide)})
    assert within.returncode == 0, within.stdout + within.stderr
    assert "REGRESSION" not in within.stdout and "CHANGED" not in within.stdout
    assert "~           step 1000 nodes: server p99 LIST pods (cluster)" in within.stdout
    assert "within the recorded noise: a second run up to +68 % above a first at 1000 nodes" in within.stdout


def test_a_repeated_side_compared_with_itself_has_no_regression(tmp_path: Path) -> None:
    """(d) self-comparison: every figure the same on both sides, p = 1."""
    a = repeated_run(tmp_path / "a", NOISE_A)
    result = compare(a, a, tmp_path / "out")
    assert result.passed and result.regressions == []
    compared = [r for r in result.rows if r.compared]
    assert compared and all(r.p_value == 1.0 and r.mark == "~" for r in compared)
    assert result.a_runs == result.b_runs == 4


def test_several_folders_a_side(tmp_path: Path) -> None:
    a = [edited_run(SAMPLE, tmp_path / f"a{k}", scale_latencies(f)) for k, f in enumerate(NOISE_A)]
    b = [edited_run(SAMPLE, tmp_path / f"b{k}", scale_latencies(f)) for k, f in enumerate(SLOWER)]
    result = loadtest("compare", "--a", *map(str, a), "--b", *map(str, b), "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "medians of 4 (A) and 4 (B) runs" in result.stdout and "p=0.029" in result.stdout
    # a repeated folder and a single run folder on one side add up
    mixed = compare([repeated_run(tmp_path / "rep", NOISE_A[:2]), a[2], a[3]], a, tmp_path / "mixed")
    assert mixed.a_runs == 4 and mixed.passed


def test_a_folder_without_results_is_one_line(tmp_path: Path) -> None:
    """(e) a side folder with no results and no repeat-* subfolders."""
    empty = tmp_path / "empty"
    (empty / "not-a-repeat").mkdir(parents=True)
    a = copy_run(SAMPLE, tmp_path / "a")
    result = loadtest("compare", str(a), str(empty), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert len(error_lines(result)) == 1
    assert "no results.json in" in result.stderr and "repeat-*/" in result.stderr
    assert not (tmp_path / "out").exists()


def test_repeats_without_results_are_left_out_or_refused(tmp_path: Path) -> None:
    a = repeated_run(tmp_path / "a", NOISE_A)
    (a / "repeat-5").mkdir()  # a repeat that recorded no step
    result = compare(a, a, tmp_path / "out")
    assert result.a_runs == 4 and any("repeat-5 has no results.json" in note for note in result.notes)
    bare = tmp_path / "bare"
    (bare / "repeat-1").mkdir(parents=True)
    with pytest.raises(CompareError, match="none of the 1 repeat-"):
        compare(a, bare, tmp_path / "out")


def test_mixed_plans_on_one_side_are_one_line_unless_forced(tmp_path: Path) -> None:
    """(e) runs of different plans on one side."""
    a = repeated_run(tmp_path / "a", NOISE_A)
    b = repeated_run(tmp_path / "b", NOISE_B)
    edited_run(SAMPLE, b / "repeat-5", other_plan)
    refused = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "out"))
    assert refused.returncode == 2
    assert len(error_lines(refused)) == 1
    assert "side B mixes runs of different plans" in refused.stderr and "--force" in refused.stderr
    forced = loadtest("compare", str(a), str(b), "--out", str(tmp_path / "out"), "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "compared anyway (forced)" in (tmp_path / "out" / "compare.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("args", [
    ("{a}",),
    ("{a}", "{a}", "--b", "{a}"),
    ("--a", "{a}"),
    ("{a}", "{a}", "--alpha", "often"),
    ("{a}", "{a}", "--alpha", "1.5"),
])
def test_bad_sides_and_flags_are_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    result = loadtest("compare", *(arg.format(a=a) for arg in args), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert len(error_lines(result)) == 1, result.stderr
