"""The page and JUnit file of a history of runs (analysis/history.py computes it; this only renders).

history.html shows the runs in start order (each with its Kubernetes version, commit where recorded, and date),
every change point with the runs on either side, its size, p-value and verdict, the series that hold histogram
bounds, and a chart per compared figure with a line per step and each change point marked. history-junit.xml has
a suite per step, a case per figure that fails when the latest run starts a regression in it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from loadtests.analysis import figures
from loadtests.analysis.history import History, Track
from loadtests.analysis.rules import RULES, rule_text
from loadtests.config.plan import REGRESSION_DEFAULTS
from loadtests.report import charts, junit, page

HISTORY_FILE = "history.html"
HISTORY_JUNIT_FILE = "history-junit.xml"


def _ticks(result: History) -> list[str]:
    """Each run's x-axis label: its version (or commit), then its day (the year too when the runs span years;
    the hover and the runs table give the time)."""
    years = {p.started.year for p in result.points}
    return [f"{p.label}<br>{p.started.strftime('%m-%d' if len(years) == 1 else '%Y-%m-%d')}" for p in result.points]


def _figure(result: History, chart: figures.Chart, members: list[Track], steps: list[int]) -> dict[str, Any]:
    palette = charts.colours([str(i) for i in steps])
    lines, marks = [], []
    for track in members:
        colour = palette[str(track.step_index)]
        hover = [f"{result.points[p].title} ({result.points[p].date}): {track.value_text(k)}"
                 for k, p in enumerate(track.positions)]
        lines.append(charts.HistoryLine(track.step_name, colour, track.positions, track.values, track.bounds, hover))
        for change in track.changes:
            value = track.values[track.positions.index(change.position)]
            marks.append(charts.HistoryMark(change.position, value, change.state,
                                            f"{track.step_name}: {change.change_text} ({change.status})"))
    return charts.history_figure(dataclasses.replace(chart, kind="line"), lines, _ticks(result), marks)


def panel_groups(result: History) -> list[tuple[figures.Chart, list[charts.Panel]]]:
    """Per chart of the run report (CHARTS order), a panel per figure: its steps as lines across the runs."""
    steps = sorted({t.step_index for t in result.tracks})
    by_figure: dict[tuple[str, str], list[Track]] = {}
    for track in result.tracks:
        by_figure.setdefault((track.chart, track.name), []).append(track)
    groups: dict[str, list[charts.Panel]] = {}
    for k, ((chart_id, name), members) in enumerate(by_figure.items()):
        chart = figures.CHARTS[chart_id]
        found = sum(len(t.changes) for t in members)
        title = f"{chart.short} {name}" + (f" · {found} change point{'s' if found != 1 else ''}" if found else "")
        groups.setdefault(chart_id, []).append(charts.Panel(
            f"chart-history-{k}", title, chart.source, _figure(result, chart, members, steps)))
    return [(figures.CHARTS[c], groups[c]) for c in figures.CHARTS if c in groups]


def _bound_lines(result: History) -> list[str]:
    """One line per series holding histogram bounds: which runs, and what the bound says."""
    found = []
    for track in result.bounded_tracks:
        runs = [result.points[p].title for p in track.bounded_positions]
        shown = [track.value_text(track.positions.index(p)) for p in track.bounded_positions]
        examples = ", ".join(dict.fromkeys(shown))
        found.append(f"step {track.step_name}: {track.label}: {len(runs)} of {len(track.positions)} runs give only a "
                     f"histogram bound ({examples}: {', '.join(runs)})")
    return found


def _runs(result: History) -> list[dict[str, Any]]:
    return [{"position": i + 1, "point": p, "status": ", ".join(dict.fromkeys(r.status for r in p.runs))}
            for i, p in enumerate(result.points)]


def junit_suites(result: History) -> list[junit.Suite]:
    """A suite per step (a case per figure, failing when the latest run starts a regression in it), then a
    `history` suite with the runs and the parameters."""
    suites: dict[int, junit.Suite] = {}
    for track in result.tracks:
        suite = suites.setdefault(track.step_index, junit.Suite(
            name=f"step {track.step_index}: {track.step_name}", properties={"nodes": str(track.nodes)}))
        lines = [f"{c.status}: {result.describe(track, c)}" for c in track.changes]
        case = junit.Case(track.step_name, track.label, failure_type="regression",
                          details="\n".join(lines) or f"no change point over {len(track.positions)} runs")
        latest = [c for c in track.changes if c.regression and c.latest]
        if latest:
            case.failure = f"{result.describe(track, latest[0])}: {result.rule_text(track)}"
        elif not track.analysed:
            case.skipped = f"measured in {len(track.positions)} run(s): too few to search for change points"
        suite.cases.append(case)
    runs = junit.Case("history", "runs lined up", failure_type="regression",
                      details="\n".join(f"{i + 1}. {result.point_text(i)}" for i in range(len(result.points))))
    properties = {"runs": str(len(result.points)), "first": result.points[0].title, "latest": result.latest.title,
                  "max_pvalue": f"{result.max_pvalue:g}", "window_len": str(result.window_len),
                  "min_magnitude": f"{result.min_magnitude:g}"}
    return [suites[i] for i in sorted(suites)] + [junit.Suite(name="history", cases=[runs], properties=properties)]


def write_history(result: History, out_dir: Path) -> tuple[Path, Path]:
    """Write history.html and history-junit.xml into out_dir; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = panel_groups(result)
    plan = result.latest.first.plan if isinstance(result.latest.first.plan, dict) else {}
    html = page.render(
        HISTORY_FILE, result=result, runs=_runs(result), groups=groups,
        figures=charts.payload([p for _, panels in groups for p in panels]),
        version_names=list(dict.fromkeys(name for p in result.points for name in p.versions)),
        commits=any(p.commit for p in result.points), bound_lines=_bound_lines(result),
        plan_name=plan.get("name", "—"), rule_names={rule: rule_text(rule, result.limits) for rule in RULES},
        defaults=REGRESSION_DEFAULTS,
        embedded=page.embedded("history", [(f"{i + 1}/{Path(p.name).name}", run) for i, p in enumerate(result.points)
                                           for run in p.runs]),
    )
    html_path = page.write(out_dir / HISTORY_FILE, html)
    junit_path = junit.write(out_dir / HISTORY_JUNIT_FILE,
                             f"history {result.points[0].title} to {result.latest.title}", junit_suites(result))
    return html_path, junit_path
