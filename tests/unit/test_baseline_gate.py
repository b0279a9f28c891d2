"""`loadtest run --baseline DIR`: a bad baseline is refused before anything starts, and the gate that compares a
finished run against its baseline (recorded results, no control plane)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadtests.analysis.noise import NOISE_FLOOR_ENV
from loadtests.analysis.samples import load_side
from loadtests.cli.run import EXIT_ABORTED, EXIT_PASSED, EXIT_SLO_FAILED, GATE_JUNIT_FILE, gate_on_baseline
from loadtests.config import plan as plan_mod
from tests.cli import error_lines, loadtest, write_tiny_plan
from tests.unit.noisedata import floor_file
from tests.unit.reportdata import ROLLING, SAMPLE, copy_run, edited_run, repeated_run, scale_latencies


def _run_with_baseline(tmp_path: Path, baseline: Path, *flags: str):
    """`loadtest run` of a tiny plan with an empty binaries cache: whatever gets past the baseline check stops
    at the missing binaries, so no control plane can start."""
    plan = write_tiny_plan(tmp_path / "plan.yaml", "tiny", (1, 1))
    out = tmp_path / "out"
    result = loadtest("run", "--plan", str(plan), "--out", str(out), "--baseline", str(baseline), *flags,
                      env={"LOADTEST_CACHE": str(tmp_path / "empty-cache")}, timeout=60)
    assert not out.exists(), "the run must not have started"
    return result


def _refused(result, *words: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, lines
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0]
    return lines[0]


def test_missing_baseline_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    _refused(_run_with_baseline(tmp_path, tmp_path / "nowhere"), "--baseline", "no such folder")


@pytest.mark.parametrize("inside", ["notes.txt", "repeat-1/notes.txt"])
def test_baseline_folder_without_results_is_refused_before_the_run(tmp_path: Path, inside: str) -> None:
    empty = tmp_path / "empty"
    (empty / inside).parent.mkdir(parents=True, exist_ok=True)
    (empty / inside).write_text("no results here")
    _refused(_run_with_baseline(tmp_path, empty), "--baseline", "results.json")


def test_a_baseline_of_mixed_plans_names_the_flag_that_forces_it(tmp_path: Path) -> None:
    mixed = repeated_run(tmp_path / "mixed", (1.0, 1.0))
    edited_run(SAMPLE, mixed / "repeat-2", lambda data: data["plan"]["load"].update(rate=10.0))
    line = _refused(_run_with_baseline(tmp_path, mixed), "mixes runs of different plans")
    assert line.endswith("; pass --force-baseline to compare anyway"), line


def test_baseline_of_another_plan_is_refused_unless_forced(tmp_path: Path) -> None:
    other = copy_run(SAMPLE, tmp_path / "other-plan")  # the sample's plan is not the tiny plan
    _refused(_run_with_baseline(tmp_path, other), "another plan", "--force-baseline")
    forced = _run_with_baseline(tmp_path, other, "--force-baseline")
    assert "gating on it anyway" in forced.stdout
    # past the baseline check, the next check (the binaries) refuses: --force-baseline skipped only the plan check
    _refused(forced, "binaries missing")


def test_baseline_of_the_same_plan_is_accepted(tmp_path: Path) -> None:
    plan = plan_mod.load(str(write_tiny_plan(tmp_path / "plan.yaml", "tiny", (1, 1))))
    same = edited_run(SAMPLE, tmp_path / "same-plan", lambda data: data.update(plan=plan.to_dict()))
    result = _run_with_baseline(tmp_path, same)
    assert "baseline: " in result.stdout and "another plan" not in result.stdout + result.stderr
    _refused(result, "binaries missing")


def test_force_flag_alone_does_not_accept_another_plan(tmp_path: Path) -> None:
    other = copy_run(SAMPLE, tmp_path / "other-plan")
    _refused(_run_with_baseline(tmp_path, other, "--force"), "another plan")


def _gate(tmp_path: Path, candidate: Path, code: int = EXIT_PASSED) -> int:
    baseline = load_side(copy_run(SAMPLE, tmp_path / "baseline"), "A")
    return gate_on_baseline(baseline, candidate, code)


def _suites(folder: Path) -> dict[str, ET.Element]:
    root = ET.parse(folder / GATE_JUNIT_FILE).getroot()
    return {suite.get("name"): suite for suite in root.iter("testsuite")}


def test_three_times_slower_fails_the_gate_naming_the_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # single runs a side: weighed against a recorded floor of +23 % (latencies up to 8 % apart run to run)
    monkeypatch.setenv(NOISE_FLOOR_ENV, str(floor_file(tmp_path / "floor")))
    run = edited_run(SAMPLE, tmp_path / "run", scale_latencies(3.0))
    assert _gate(tmp_path, run) == EXIT_SLO_FAILED
    out = capsys.readouterr().out
    assert "REGRESSION  step" in out and "GATE FAIL" in out and "checks failed" not in out
    assert (run / "compare" / "compare.html").is_file() and (run / "compare" / "compare-junit.xml").is_file()
    suites = _suites(run)
    slo = [name for name in suites if name.startswith("SLO: ")]
    compared = [name for name in suites if name.startswith("baseline: ")]
    assert "SLO: run" in slo and len(slo) >= 2
    assert "baseline: run" in compared and len(compared) >= 2
    failures = [case.find("failure").get("message") for name in compared for case in suites[name].iter("testcase")
                if case.find("failure") is not None]
    assert failures and all("worse by" in message for message in failures)
    root = ET.parse(run / GATE_JUNIT_FILE).getroot()
    assert int(root.get("failures")) >= len(failures)


def test_single_runs_with_no_recorded_noise_pass_the_gate_saying_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text('{"figures": {}}')
    monkeypatch.setenv(NOISE_FLOOR_ENV, str(empty))
    run = edited_run(SAMPLE, tmp_path / "run", scale_latencies(3.0))
    assert _gate(tmp_path, run) == EXIT_PASSED
    out = capsys.readouterr().out
    assert "REGRESSION" not in out and "CHANGED     step" in out
    assert "GATE PASS" in out and "change(s) past their threshold, not noise-checked" in out
    suites = _suites(run)
    assert all(suite.get("failures") == "0" for name, suite in suites.items() if name.startswith("baseline: "))


def test_identical_run_passes_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = copy_run(SAMPLE, tmp_path / "run")
    assert _gate(tmp_path, run) == EXIT_PASSED
    assert "GATE PASS" in capsys.readouterr().out
    suites = _suites(run)
    assert "SLO: run" in suites and "baseline: run" in suites
    assert all(suite.get("failures") == "0" for name, suite in suites.items() if name.startswith("baseline: "))


def test_failed_slo_fails_the_gate_without_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = copy_run(SAMPLE, tmp_path / "run")
    assert _gate(tmp_path, run, EXIT_SLO_FAILED) == EXIT_SLO_FAILED
    out = capsys.readouterr().out
    assert "GATE FAIL: a check of the run failed" in out and "REGRESSION" not in out


def test_the_gate_names_the_checks_its_runs_failed_once_each() -> None:
    from loadtests.cli.run import checks_failed
    from loadtests.results import load

    rolled = load(ROLLING)  # its roll was not available enough
    assert checks_failed([rolled, rolled]) == "checks failed: availability at step roll"
    assert checks_failed([load(SAMPLE)]) == "a check of the run failed"  # no name: as for a code given alone


def test_aborted_run_keeps_its_code_and_is_not_compared(tmp_path: Path) -> None:
    run = copy_run(SAMPLE, tmp_path / "run")
    assert _gate(tmp_path, run, EXIT_ABORTED) == EXIT_ABORTED
    assert not (run / "compare").exists() and not (run / GATE_JUNIT_FILE).exists()


def test_repeated_runs_are_gated_with_a_noise_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline, run = tmp_path / "baseline", tmp_path / "run"
    for k in range(1, 5):
        copy_run(SAMPLE, baseline / f"repeat-{k}")
        edited_run(SAMPLE, run / f"repeat-{k}", scale_latencies(3.0 + k / 100))
    assert gate_on_baseline(load_side(baseline, "A"), run, EXIT_PASSED) == EXIT_SLO_FAILED
    out = capsys.readouterr().out
    assert "noise-checked: medians of 4 (A) and 4 (B) runs" in out and "REGRESSION  step" in out
    names = list(_suites(run))
    assert {f"SLO repeat-{k}: run" for k in range(1, 5)} <= set(names) and "baseline: run" in names


@pytest.mark.parametrize("repeat", ["0", "-2", "many"])
def test_a_bad_repeat_count_is_one_line(tmp_path: Path, repeat: str) -> None:
    plan = write_tiny_plan(tmp_path / "plan.yaml", "tiny", (1, 1))
    result = loadtest("run", "--plan", str(plan), "--out", str(tmp_path / "out"), "--repeat", repeat,
                      env={"LOADTEST_CACHE": str(tmp_path / "empty-cache")}, timeout=60)
    _refused(result, "--repeat")
    assert not (tmp_path / "out").exists()
