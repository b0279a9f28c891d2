"""The comparison of two runs of the same plan (e.g. before and after an upgrade) as pages: compare.html and
compare-junit.xml, drawn from what the judge decided (analysis/judge.py: every figure's change, threshold, noise
and verdict, and how the noise was weighed). Side A is the baseline, side B the candidate; each side is one run
or several runs of the same plan (repeats, see samples.py). This module decides nothing: it draws the sides'
charts (a side of several runs as its medians) and writes the judge's rows as tables and JUnit cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadtests.analysis import figures, stats
from loadtests.analysis.judge import NOT_NOISE_CHECKED, NOT_SIGNIFICANT, CompareResult, judge_sides
from loadtests.analysis.noise import NoiseFloor, NoiseFloors
from loadtests.analysis.rules import RULES, limits_from, rule_text
from loadtests.analysis.samples import Side, load_side, readings
from loadtests.config.plan import REGRESSION_DEFAULTS
from loadtests.report import charts, junit, page
from loadtests.report.redact import redact

COMPARE_FILE = "compare.html"
COMPARE_JUNIT_FILE = "compare-junit.xml"


Values = dict[tuple[str, str], dict[int, list[float]]]  # (chart, name) -> step index -> one value per run


def values(side: Side, every: bool = False) -> tuple[Values, dict[tuple[str, str], str | None]]:
    """Every compared figure's values per step across the side's runs (a bound counted as its value), and each
    figure's rule (None for a figure that is shown only); `every` takes the shown-only figures too."""
    found, rules = readings(side, every)
    return {key: {i: [v for v, _ in got] for i, got in per_step.items()} for key, per_step in found.items()}, rules


def side_series(side: Side, every: bool = False) -> list[figures.Series]:
    """The series to draw for a side: its run's, or for several runs the median per step (SLO lines from the
    first run); `every` takes the shown-only figures of several runs too (a single run's are always there)."""
    if side.n == 1:
        return figures.series(side.first)
    steps = [s.index for s in side.steps]
    found_values, rules = values(side, every)
    found = [figures.Series(chart, name, [stats.summarize(per_step[i]).median if per_step.get(i) else None
                                          for i in steps], rule=rules[(chart, name)])
             for (chart, name), per_step in found_values.items()]
    for s in figures.series(side.first):
        if s.slo_line:
            found.append(figures.Series(s.chart, s.name, [s.values[0]] * len(steps), slo_line=True))
    order = list(figures.CHARTS)
    return sorted(found, key=lambda s: (order.index(s.chart), s.slo_line))


def _panels(a: Side, b: Side) -> list[charts.Panel]:
    """Overlaid charts: A solid, B dashed (or hatched bars), same colour per figure; SLO lines from A.
    A side of several runs is drawn as its medians."""
    groups: dict[str, list[charts.Line]] = {}
    for side, tag in ((a, "A"), (b, "B")):
        nodes = [s.nodes for s in side.steps]
        labels = [s.name for s in side.steps]
        for s in side_series(side):
            if s.slo_line and tag == "B":
                continue
            if not s.rule and not s.slo_line:
                continue
            groups.setdefault(s.chart, []).append(charts.Line(
                s, s.name if s.slo_line else f"{tag}: {s.name}", "", nodes, labels,
                dash="dash" if tag == "B" else "solid", pattern="/" if tag == "B" else "", group=s.name))
    for lines in groups.values():
        palette = charts.colours([line.series.name for line in lines if not line.series.slo_line])
        for line in lines:
            line.colour = palette.get(line.series.name, charts.SLO_COLOUR)
    return charts.panels(groups, figures.chart_sources(a.first))


def _statuses(side: Side) -> str:
    """"complete", or how many of the side's runs completed."""
    if side.n == 1:
        return side.first.status
    return f"{side.n - len(side.incomplete)} of {side.n} runs complete"


def _run_summary(side: Side) -> dict[str, Any]:
    run = side.first
    env = redact(run.environment if isinstance(run.environment, dict) else {})
    versions = env.get("versions") if isinstance(env.get("versions"), dict) else {}
    return {"run": run, "side": side, "id": side.run_id, "versions": versions, "digest": run.plan_digest,
            "status": _statuses(side), "errors": [r.error for r, _ in side.incomplete if r.error],
            "scale": " → ".join(f"{s.nodes:,}" for s in side.steps) or "no steps"}


def junit_suites(result: CompareResult, a: Side, b: Side) -> list[junit.Suite]:
    """The comparison as JUnit: a suite per step (a case per compared figure), then a `run` suite."""
    suites: dict[int, junit.Suite] = {}
    for row in result.rows:
        suite = suites.setdefault(row.step_index, junit.Suite(
            name=f"step {row.step_index}: {row.step_name}", properties={"nodes": str(row.nodes)}))
        text = row.describe()
        if row.mark:
            text += f"; {NOT_SIGNIFICANT} no significant difference (alpha {row.alpha:g})"
        case = junit.Case(row.step_name, row.label, details=f"{text}; regression when {row.rule_text}",
                          failure_type="regression")
        if row.regression:
            case.failure = f"{text}: {row.rule_text}"
        elif not row.compared:
            case.skipped = row.status
        elif row.unchecked_change:
            case.skipped = f"changed, {NOT_NOISE_CHECKED}: {text}: {row.rule_text}"
        suite.cases.append(case)
    completed = junit.Case("run", "run completed", failure_type="regression",
                           details=f"A {_statuses(a)}, B {_statuses(b)}")
    if result.run_regressions:
        completed.failure = "; ".join(result.run_regressions)
    run_suite = junit.Suite(name="run", cases=[completed], properties={
        "a": a.run_id, "b": b.run_id, "a_runs": str(a.n), "b_runs": str(b.n),
        "alpha": f"{result.thresholds['alpha']:g}", "noise": result.noise, "noise_floor": result.noise_floor})
    return [suites[i] for i in sorted(suites)] + [run_suite]


def compare(a_folder: Path | Sequence[Path], b_folder: Path | Sequence[Path], out_dir: Path,
            thresholds: dict[str, Any] | None = None, force: bool = False,
            noise_floor: NoiseFloors | NoiseFloor | None = None) -> CompareResult:
    """Compare side B (candidate) against side A (baseline), each a run folder, a folder of repeated runs, or a
    list of such folders; write compare.html and compare-junit.xml. `noise_floor`: the recorded noise (default:
    noise.load(), the package's or $LOADTEST_NOISE_FLOOR's)."""
    limits_from(thresholds)  # bad thresholds are refused before any folder is read
    a, b = load_side(a_folder, "A", force), load_side(b_folder, "B", force)
    return compare_sides(a, b, out_dir, thresholds, force, noise_floor)


def compare_sides(a: Side, b: Side, out_dir: Path, thresholds: dict[str, Any] | None = None,
                  force: bool = False, noise_floor: NoiseFloors | NoiseFloor | None = None) -> CompareResult:
    """Judge loaded sides (see samples.load_side) and write compare.html and compare-junit.xml."""
    result = judge_sides(a, b, thresholds, force, noise_floor)
    limits = result.thresholds
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    panels = _panels(a, b)
    summary_a, summary_b = _run_summary(a), _run_summary(b)
    html = page.render(
        COMPARE_FILE, result=result, a=summary_a, b=summary_b, panels=panels, figures=charts.payload(panels),
        rule_names={rule: rule_text(rule, limits) for rule in RULES}, limits=limits, defaults=REGRESSION_DEFAULTS,
        version_names=list(dict.fromkeys([*summary_a["versions"], *summary_b["versions"]])),
        embedded=page.embedded("compare", [(f"{side.label}/{folder.name}", run) for side in (a, b)
                                           for run, folder in zip(side.runs, side.folders, strict=True)]),
    )
    result.html_path = page.write(out_dir / COMPARE_FILE, html)
    result.junit_path = junit.write(out_dir / COMPARE_JUNIT_FILE, f"compare {a.first.run_id} vs {b.first.run_id}",
                                    junit_suites(result, a, b))
    return result
