"""Run-to-run comparison: same plan only (unless forced), regression rules, the recorded noise floor, bounds,
outputs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadtests.analysis.noise import NoiseFloor
from loadtests.analysis.rules import regressed
from loadtests.config.plan import REGRESSION_DEFAULTS
from loadtests.errors import CompareError, LoadTestError
from loadtests.report.compare import compare
from tests.unit.noisedata import WIDE_NOISE_RUNS, recorded_floor
from tests.unit.reportdata import ABORTED, SAMPLE, copy_run, edited_run, scale_latencies


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    return copy_run(SAMPLE, tmp_path / "a")


@pytest.fixture
def floor(tmp_path: Path) -> NoiseFloor:
    """Latencies measured up to 8 % apart over 5 runs of the sample's plan (a floor of +23 %); everything else did
    not move."""
    return recorded_floor(tmp_path / "noise")


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


def test_tripled_latencies_regress_beyond_the_recorded_noise(baseline: Path, tmp_path: Path,
                                                            floor: NoiseFloor) -> None:
    slower = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    result = compare(baseline, slower, tmp_path / "out", noise_floor=floor)
    assert not result.passed and result.label == "REGRESSION"
    assert result.unchecked_changes == []  # every latency has a recorded noise
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
    pod = next(r for r in result.regressions if r.step_index == 0 and r.label == "pod startup p99")
    assert pod.beyond_noise and pod.floor.runs_spread_pct == pytest.approx(1.04 / 0.96 * 100 - 100, abs=0.01)
    assert "beyond the recorded noise: a second run up to +23 % above a first at" in pod.describe()
    assert "weighed against the recorded noise (single runs)" in result.noise and "8 cores (recorded)" in result.noise


def test_single_runs_without_a_recorded_noise_show_changes_not_regressions(baseline: Path, tmp_path: Path) -> None:
    slower = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    result = compare(baseline, slower, tmp_path / "out", noise_floor=NoiseFloor())
    assert result.passed and result.regressions == []
    assert result.label == "CHANGES" and result.state == "skip"
    changed = {(r.step_index, r.label) for r in result.unchecked_changes}
    assert (2, "server p99 LIST pods (cluster)") in changed and (0, "pod startup p99") in changed
    assert all(r.status == "worse, not noise-checked" and not r.noise_checked for r in result.unchecked_changes)
    assert f"{len(changed)} changes, not noise-checked" in result.headline
    assert result.headline.startswith("no regression in")
    assert result.noise.startswith("verdicts not noise-checked (single runs)") and "no noise floor" in result.noise
    html = result.html_path.read_text(encoding="utf-8")
    assert ">CHANGES<" in html and 'id="changes"' in html and "REGRESSION" not in html
    root = ET.parse(result.junit_path).getroot()
    assert root.get("failures") == "0"
    skipped = [s.get("message") for s in root.iter("skipped") if s.get("message").startswith("changed")]
    assert len(skipped) == len(changed) and all("not noise-checked" in m for m in skipped)


def test_a_change_within_the_recorded_noise_is_marked_not_flagged(baseline: Path, tmp_path: Path) -> None:
    wide = recorded_floor(tmp_path / "noise", WIDE_NOISE_RUNS)  # a floor of +68 %
    within = compare(baseline, edited_run(SAMPLE, tmp_path / "b", scale_latencies(1.4)), tmp_path / "out",
                     noise_floor=wide)
    assert within.passed and within.label == "PASS"
    row = next(r for r in within.rows if r.step_index == 2 and r.label == "server p99 LIST pods (cluster)")
    assert row.past_threshold and not row.regression and row.mark == "~" and row.beyond_noise is False
    assert "within the recorded run-to-run noise" in within.headline
    beyond = compare(baseline, edited_run(SAMPLE, tmp_path / "c", scale_latencies(1.8)), tmp_path / "out2",
                     noise_floor=wide)
    assert (2, "server p99 LIST pods (cluster)") in {(r.step_index, r.label) for r in beyond.regressions}


def test_plans_without_a_floor_of_their_own_are_weighed_against_the_widest_saying_so(
        baseline: Path, tmp_path: Path, floor: NoiseFloor) -> None:
    def other_name(data: dict) -> None:
        scale_latencies(3.0)(data)
        data["plan"]["name"] = "smoke"

    result = compare(baseline, edited_run(SAMPLE, tmp_path / "b", other_name), tmp_path / "out", force=True,
                     noise_floor=floor)
    assert not result.passed and result.regressions  # every latency tripled: far beyond +23 %, the widest recorded
    why = result.regressions[0].describe()
    assert "the widest recorded for any plan (plans default, smoke compared, no floor of their own)" in why
    assert result.noise_floor.startswith("plans default, smoke compared, no floor of their own: the widest")


def test_thresholds_can_be_relaxed(baseline: Path, tmp_path: Path, floor: NoiseFloor) -> None:
    slower = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    result = compare(baseline, slower, tmp_path / "out", thresholds={"latency_pct": 250}, noise_floor=floor)
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
    assert "\n" not in message and "plans differ" in message and message.endswith("; pass --force to compare anyway")
    assert not (tmp_path / "out" / "compare.html").exists()
    forced = compare(baseline, other, tmp_path / "out", force=True)
    assert forced.passed
    assert any("forced" in note for note in forced.notes)
    assert "compared anyway" in forced.html_path.read_text(encoding="utf-8")


def test_steps_of_other_scales_are_refused_naming_the_flag_as_typed(baseline: Path, tmp_path: Path) -> None:
    def other_scale(data: dict) -> None:
        data["steps"][0]["nodes"] += 1

    other = edited_run(SAMPLE, tmp_path / "b", other_scale)
    with pytest.raises(CompareError) as refused:
        compare(baseline, other, tmp_path / "out")
    assert str(refused.value).endswith("; pass --force to compare anyway")


def test_aborted_candidate_is_a_run_regression(baseline: Path, tmp_path: Path) -> None:
    result = compare(baseline, copy_run(ABORTED, tmp_path / "b"), tmp_path / "out")
    assert not result.passed
    assert result.regressions == []  # its one recorded step is the same as A's
    assert "B did not complete" in result.run_regressions[0]
    assert any("only in A" in note for note in result.notes)
    assert {r.status for r in result.rows if r.step_index > 0} == {"only in A"}
    root = ET.parse(result.junit_path).getroot()
    assert root.find("./testsuite[@name='run']/testcase/failure") is not None


def test_new_errors_and_throttling_regress(baseline: Path, tmp_path: Path, floor: NoiseFloor) -> None:
    def errors(data: dict) -> None:
        data["steps"][0]["requests_by_code"]["503"] = 1
        data["steps"][2]["requests_by_code"]["429"] += 1

    # the noise runs never had a 5xx, and the same 429 count at every run: one more is beyond that noise
    result = compare(baseline, edited_run(SAMPLE, tmp_path / "b", errors), tmp_path / "out", noise_floor=floor)
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


def test_first_bucket_bounds_on_both_sides_are_not_a_change(tmp_path: Path, floor: NoiseFloor) -> None:
    strict = {"latency_abs_s": 0.005}
    # interpolated inside the first bucket (what histogram_quantile prints), 10 ms against 45 ms: flagged ...
    a = edited_run(SAMPLE, tmp_path / "a", _post_pods_p99(0.010))
    b = edited_run(SAMPLE, tmp_path / "b", _post_pods_p99(0.045))
    label = "server p99 POST pods"
    flagged = compare(a, b, tmp_path / "out1", thresholds=strict, noise_floor=floor).regressions
    assert any(r.label == label for r in flagged)
    # ... while all the histogram says on both sides is "under 50 ms": the same figure, never a regression
    a = edited_run(SAMPLE, tmp_path / "a2", _post_pods_p99(0.05, "<"))
    b = edited_run(SAMPLE, tmp_path / "b2", _post_pods_p99(0.05, "<"))
    result = compare(a, b, tmp_path / "out2", thresholds=strict, noise_floor=floor)
    rows = [r for r in result.rows if r.label == label]
    assert rows and all(r.direction == "same" and not r.regression for r in rows)


def _post_pods_row(tmp_path: Path, a: tuple[float, str], b: tuple[float, str], floor: NoiseFloor | None = None,
                   tag: str = "x"):
    """The first step's POST pods row of a comparison of two single runs with these p99s."""
    result = compare(edited_run(SAMPLE, tmp_path / f"{tag}-a", _post_pods_p99(*a)),
                     edited_run(SAMPLE, tmp_path / f"{tag}-b", _post_pods_p99(*b)), tmp_path / f"{tag}-out",
                     noise_floor=floor if floor is not None else NoiseFloor())
    return result, next(r for r in result.rows if r.step_index == 0 and r.label == "server p99 POST pods")


def test_a_bound_against_a_value_is_compared_as_a_bound(tmp_path: Path, floor: NoiseFloor) -> None:
    # "< 50 ms" against 195.4 ms: at least +291 %, the least change the bound allows
    result, row = _post_pods_row(tmp_path, (0.05, "<"), (0.1954, ""), tag="up")
    assert row.direction == "up" and row.change_prefix == "≥ " and row.change_pct == pytest.approx(290.8)
    assert row.describe().startswith("A < 50.0 ms → B 195.4 ms (≥ +291 %")
    assert row.unchecked_change and not row.regression  # no recorded noise: a change
    html = result.html_path.read_text(encoding="utf-8")
    assert "&lt; 50.0 ms" in html and "≥ +290.8 %" in html
    # with the figure's recorded floor (+23 %), even the least change the bound allows is beyond it
    _, row = _post_pods_row(tmp_path, (0.05, "<"), (0.1954, ""), floor, tag="floor")
    assert row.regression and row.beyond_noise
    # 30 ms against "< 50 ms": B may be lower or higher; nothing to call
    _, row = _post_pods_row(tmp_path, (0.03, ""), (0.05, "<"), floor, tag="overlap")
    assert row.direction == "overlap" and row.change_pct is None and not row.past_threshold and not row.regression
    assert row.status == "within a histogram bound" and "cannot tell" in row.describe()
    # 195 ms against "< 50 ms": better by at least 74 %
    _, row = _post_pods_row(tmp_path, (0.1954, ""), (0.05, "<"), floor, tag="down")
    assert row.direction == "down" and row.change_prefix == "≤ " and row.change_pct == pytest.approx(-74.4, abs=0.1)
    # "> 60 s" (the open last bucket) against 1 s: worse by at least 59 s, and B's side says so
    _, row = _post_pods_row(tmp_path, (1.0, ""), (60.0, ">"), floor, tag="over")
    assert row.direction == "up" and row.b_high == float("inf") and row.median_text("b") == "> 60.00 s"
    assert row.regression
    # "> 60 s" in A: B can never be shown worse than that
    _, row = _post_pods_row(tmp_path, (60.0, ">"), (90.0, ""), floor, tag="open")
    assert row.direction == "overlap" and not row.regression


def test_a_median_of_bounds_and_values_is_a_range(tmp_path: Path, floor: NoiseFloor) -> None:
    from loadtests.analysis.judge import interval

    assert interval([(0.05, "<"), (0.05, "<"), (0.07, "")]) == (0.0, 0.05)  # the median is under 50 ms
    assert interval([(0.05, "<"), (0.06, ""), (0.07, "")]) == (0.06, 0.06)  # a bound below the median: exact
    low, high = interval([(60.0, ">"), (60.0, ">"), (1.0, "")])
    assert low == 60.0 and high == float("inf")
