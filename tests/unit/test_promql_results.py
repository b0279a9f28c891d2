"""The plan's PromQL figures and checks from recorded results on: a check that did not hold ends the run with exit
1 and its query in the JUnit message (one that held, 0); a figure with a regression rule is weighed by
`loadtest compare`, found by `history` and written to the run index like the built-in figures."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from loadtests import results
from loadtests.analysis.figures import series
from loadtests.analysis.history import history, load_points
from loadtests.cli.main import build_parser
from loadtests.cli.run import verdict_code
from loadtests.errors import EXIT_PASSED, EXIT_SLO_FAILED
from loadtests.index.store import figure_rows
from loadtests.report.compare import compare
from loadtests.report.html import write_report
from tests.unit.reportdata import (
    PROMQL_CHECK,
    PROMQL_CHECK_QUERY,
    PROMQL_FIGURE,
    SAMPLE,
    edited_run,
    repeated_run,
    with_promql,
)
from tests.unit.test_history import runs

SENT_CHECK = PROMQL_CHECK_QUERY.replace("%v", "60000ms")  # as a 60 s window sends it
REPEATS = (0.96, 0.98, 1.0, 1.02, 1.04)  # five a side: the fewest whose own noise can tell a change (p < 0.05)


@pytest.mark.parametrize(("errors", "gate", "code"), [(3.0, True, EXIT_SLO_FAILED), (0.0, True, EXIT_PASSED),
                                                      (3.0, False, EXIT_PASSED)])
def test_a_failing_check_exits_1_with_its_query_in_the_junit_message(
        tmp_path: Path, capsys: pytest.CaptureFixture, errors: float, gate: bool, code: int) -> None:
    folder = edited_run(SAMPLE, tmp_path / "run", with_promql(0.1, errors))
    write_report(folder)  # junit.xml as the run writes it, from its results
    assert verdict_code(results.load(folder), gate) == code  # what `loadtest run` ends with (--no-gate: gate off)
    said = capsys.readouterr().out.splitlines()
    cases = [c for c in ET.parse(folder / "junit.xml").getroot().iter("testcase") if c.get("name") == PROMQL_CHECK]
    assert [c.get("classname") for c in cases] == [f"{n} nodes: PromQL checks" for n in (100, 500, 1000)]
    failures = [c.find("failure") for c in cases if c.find("failure") is not None]
    if errors:
        assert len(failures) == 3 and all(f.get("type") == "PromQL check" for f in failures)
        assert all(f.get("message") == f"{PROMQL_CHECK}: 3 (needed <= 0); query: {SENT_CHECK}" for f in failures)
        assert f"FAILED      step 1000 nodes: PromQL check {PROMQL_CHECK}: 3 (needed <= 0); query: {SENT_CHECK}" in said
        assert said[-1].startswith("FAIL: ") and f"PromQL check {PROMQL_CHECK} at step 100 nodes" in said[-1]
    else:
        assert failures == [] and said[-1].startswith("PASS: ")


def _figure(result: Any, step_index: int) -> Any:
    return next(r for r in result.rows if r.step_index == step_index and r.label.endswith(PROMQL_FIGURE))


def test_compare_weighs_a_promql_figure_by_its_rule(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Five repeats a side, weighed against their own noise (the plan with PromQL figures has no recorded floor):
    the PromQL p99 tripled is a latency regression at every step; the same figure on both sides is no change."""
    a = repeated_run(tmp_path / "a", REPEATS, with_promql(0.1, 0.0))
    b = repeated_run(tmp_path / "b", REPEATS, with_promql(0.3, 0.0))
    same = compare(a, a, tmp_path / "same")
    assert same.passed and all(_figure(same, k).direction == "same" for k in (0, 1, 2))
    worse = compare(a, b, tmp_path / "worse")
    assert not worse.passed and worse.label == "REGRESSION"
    for k in (0, 1, 2):
        row = _figure(worse, k)
        assert row.rule == "latency" and row.regression, row
    assert {(r.step_index, r.label) for r in worse.regressions} >= {(k, _figure(worse, k).label) for k in (0, 1, 2)}
    assert PROMQL_FIGURE in worse.html_path.read_text(encoding="utf-8")
    failures = [c for c in ET.parse(worse.junit_path).getroot().iter("testcase")
                if c.find("failure") is not None and PROMQL_FIGURE in (c.get("name") or "")]
    assert len(failures) == 3, [c.get("name") for c in failures]
    # `loadtest compare` says it and exits 1
    args = build_parser().parse_args(["compare", str(a), str(b), "--out", str(tmp_path / "cli")])
    assert args.func(args) == EXIT_SLO_FAILED
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("REGRESSION  step")]
    assert sum(PROMQL_FIGURE in line for line in said) == 3, said


def test_history_finds_a_step_in_a_promql_figure(tmp_path: Path) -> None:
    def edit(data: dict[str, Any], k: int) -> None:
        with_promql(0.1 if k < 7 else 0.3, 0.0)(data)

    points, notes = load_points(runs(tmp_path, edit=edit))
    result = history(points, notes=notes)
    tracks = [t for t in result.analysed if t.label.endswith(PROMQL_FIGURE)]
    assert sorted(t.step_index for t in tracks) == [0, 1, 2]
    changed = sorted((t.step_index, c.position + 1, c.regression) for t, c in result.changes
                     if t.label.endswith(PROMQL_FIGURE))
    assert changed == [(0, 7, True), (1, 7, True), (2, 7, True)]


def test_the_run_index_holds_promql_figures_as_history_reads_them(tmp_path: Path) -> None:
    run = results.load(edited_run(SAMPLE, tmp_path / "run", with_promql(0.1, 3.0)))
    rows = figure_rows("uid", run)
    promql = [row for row in rows if row[3] == PROMQL_FIGURE]
    assert [(r[1], r[2], r[4], r[5], r[6]) for r in promql] == [
        (k, "promql_s", "s", "latency", pytest.approx(0.1 * (k + 1))) for k in (0, 1, 2)]
    # the same series the report charts and history reads; checks are verdicts, not figures
    assert [s.values for s in series(run) if s.name == PROMQL_FIGURE] == [[r[6] for r in promql]]
    assert not [row for row in rows if row[3] == PROMQL_CHECK]
