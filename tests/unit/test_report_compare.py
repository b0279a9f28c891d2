"""Run-to-run comparison: same plan only (unless forced), regression rules, outputs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadtests.errors import CompareError, LoadTestError
from loadtests.report import REGRESSION_DEFAULTS, compare
from loadtests.report.compare import regressed
from tests.unit.reportdata import ABORTED, SAMPLE, copy_run, edited_run, scale_latencies


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    return copy_run(SAMPLE, tmp_path / "a")


def test_run_compared_with_itself_has_no_regression(baseline: Path, tmp_path: Path) -> None:
    result = compare(baseline, baseline, tmp_path / "out")
    assert result.passed
    assert result.regressions == []
    assert result.rows and all(r.compared and r.direction == "same" for r in result.rows)
    assert {r.step_index for r in result.rows} == {0, 1, 2}
    assert (tmp_path / "out" / "compare.html").exists()
    root = ET.parse(tmp_path / "out" / "compare-junit.xml").getroot()
    assert int(root.get("tests")) == len(result.rows) + 1
    assert root.get("failures") == "0"
    html = result.html_path.read_text(encoding="utf-8")
    assert html.count('<script id="plotly-js">') == 1
    assert "no regression in" in html


def test_tripled_latencies_regress(baseline: Path, tmp_path: Path) -> None:
    slower = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    result = compare(baseline, slower, tmp_path / "out")
    assert not result.passed
    labels = {(r.step_index, r.label) for r in result.regressions}
    assert (2, "server p99 LIST pods (cluster)") in labels
    assert (0, "pod startup p99") in labels
    assert (2, "client p99 POST pods") in labels
    # tripled but still within 50 ms of A: not a regression (the absolute margin)
    binding = next(r for r in result.rows if r.step_index == 0 and r.label == "server p99 POST pods/binding")
    assert binding.direction == "up" and not binding.regression
    assert all(r.rule == "latency" for r in result.regressions)
    root = ET.parse(result.junit_path).getroot()
    assert int(root.get("failures")) == len(result.regressions)
    html = result.html_path.read_text(encoding="utf-8")
    assert "REGRESSION" in html and f"{len(result.regressions)} regression(s)" in html


def test_thresholds_can_be_relaxed(baseline: Path, tmp_path: Path) -> None:
    slower = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    result = compare(baseline, slower, tmp_path / "out", thresholds={"latency_pct": 250})
    assert result.passed
    assert result.thresholds["latency_pct"] == 250


def test_unknown_threshold_is_refused(baseline: Path, tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="unknown key 'latency'"):
        compare(baseline, baseline, tmp_path / "out", thresholds={"latency": 10})


def test_different_plans_are_refused_in_one_line_unless_forced(baseline: Path, tmp_path: Path) -> None:
    def other_load(data: dict) -> None:
        data["plan"]["load"]["pod_churn"]["rate"] = 10.0

    other = edited_run(SAMPLE, tmp_path / "b", other_load)
    with pytest.raises(CompareError) as refused:
        compare(baseline, other, tmp_path / "out")
    assert isinstance(refused.value, LoadTestError)
    message = str(refused.value)
    assert "\n" not in message and "plans differ" in message and "force" in message
    assert not (tmp_path / "out" / "compare.html").exists()
    forced = compare(baseline, other, tmp_path / "out", force=True)
    assert forced.passed
    assert any("forced" in note for note in forced.notes)
    assert "compared anyway" in forced.html_path.read_text(encoding="utf-8")


def test_aborted_candidate_is_a_run_regression(baseline: Path, tmp_path: Path) -> None:
    result = compare(baseline, copy_run(ABORTED, tmp_path / "b"), tmp_path / "out")
    assert not result.passed
    assert result.regressions == []  # its one recorded step is the same as A's
    assert "B did not complete" in result.run_regressions[0]
    assert any("only in A" in note for note in result.notes)
    assert {r.status for r in result.rows if r.step_index > 0} == {"only in A"}
    root = ET.parse(result.junit_path).getroot()
    assert root.find("./testsuite[@name='run']/testcase/failure") is not None


def test_new_errors_and_throttling_regress(baseline: Path, tmp_path: Path) -> None:
    def errors(data: dict) -> None:
        data["steps"][0]["requests_by_code"]["503"] = 1
        data["steps"][2]["requests_by_code"]["429"] += 1

    result = compare(baseline, edited_run(SAMPLE, tmp_path / "b", errors), tmp_path / "out")
    assert {(r.step_index, r.name) for r in result.regressions} == {(0, "5xx server errors"), (2, "429 throttled")}


@pytest.mark.parametrize(("rule", "a", "b", "expected"), [
    ("latency", 0.100, 0.140, False),  # +40 % but only 40 ms: under the absolute margin
    ("latency", 0.100, 0.151, True),
    ("latency", 0.010, 0.055, False),  # +450 % but only 45 ms
    ("memory", 1000.0, 1190.0, False),
    ("memory", 1000.0, 1210.0, True),
    ("cpu", 10.0, 14.0, False),  # +40 % but 4 points
    ("cpu", 40.0, 53.0, True),
    ("errors_5xx", 0.0, 1.0, True),
    ("throttled_429", 5.0, 5.0, False),
])
def test_regression_rules(rule: str, a: float, b: float, expected: bool) -> None:
    assert regressed(rule, a, b, dict(REGRESSION_DEFAULTS)) is expected


def test_missing_results_are_refused_in_one_line(baseline: Path, tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="no results.json in") as refused:
        compare(baseline, tmp_path / "nowhere", tmp_path / "out")
    assert "\n" not in str(refused.value)


def _post_pods_p99(value: float, bound: str = ""):
    def edit(data: dict) -> None:
        for step in data["steps"]:
            for entry in step["server"]:
                if entry["verb"] == "POST" and entry["resource"] == "pods":
                    entry.update(p99=value, bounds={"p99": bound} if bound else {})
    return edit


def test_first_bucket_bounds_on_both_sides_are_not_a_change(tmp_path: Path) -> None:
    strict = {"latency_abs_s": 0.005}
    # interpolated inside the first bucket (what histogram_quantile prints), 10 ms against 45 ms: flagged ...
    a = edited_run(SAMPLE, tmp_path / "a", _post_pods_p99(0.010))
    b = edited_run(SAMPLE, tmp_path / "b", _post_pods_p99(0.045))
    label = "server p99 POST pods"
    assert any(r.label == label for r in compare(a, b, tmp_path / "out1", thresholds=strict).regressions)
    # ... while all the histogram says on both sides is "under 50 ms": the same figure, never a regression
    a = edited_run(SAMPLE, tmp_path / "a2", _post_pods_p99(0.05, "<"))
    b = edited_run(SAMPLE, tmp_path / "b2", _post_pods_p99(0.05, "<"))
    result = compare(a, b, tmp_path / "out2", thresholds=strict)
    rows = [r for r in result.rows if r.label == label]
    assert rows and all(r.direction == "same" and not r.regression for r in rows)
