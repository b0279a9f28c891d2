"""A lesson's page: lesson.html (self-contained) beside lesson.json, its charts, and the markdown table of
lessons' verdicts; the readings are analysis/lesson_runs.py's, the verdicts analysis/lesson.py's."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from loadtests.analysis.formats import times
from loadtests.analysis.lesson import Growth, evaluate, summary
from loadtests.analysis.lesson_runs import LESSON_RESULTS, lesson_record
from loadtests.config.lesson import Lesson, Measure
from loadtests.report import charts, page
from loadtests.results import RESULTS_FILE

LESSON_PAGE = "lesson.html"


def _bar_panel(index: int, measure: Measure, by_variant: dict[str, list[float]]) -> charts.Panel:
    factor, label, hover = charts.DISPLAY.get(measure.unit, (1.0, measure.unit, "%{y:,.3g}"))
    names = list(by_variant)
    medians = [statistics.median(v) * factor if v else None for v in by_variant.values()]
    plus = [(max(v) - statistics.median(v)) * factor if v else 0 for v in by_variant.values()]
    minus = [(statistics.median(v) - min(v)) * factor if v else 0 for v in by_variant.values()]
    palette = charts.colours(names)
    trace = {"type": "bar", "x": names, "y": medians, "marker": {"color": [palette[n] for n in names]},
             "hovertemplate": hover + "<extra></extra>",
             "error_y": {"type": "data", "array": plus, "arrayminus": minus, "visible": any(plus) or any(minus)}}
    layout = {"margin": {"l": 60, "r": 10, "t": 10, "b": 40}, "height": 260, "showlegend": False,
              "yaxis": {"title": {"text": label}, "rangemode": "tozero"}, "font": {"family": charts.FONT, "size": 12}}
    return charts.Panel(f"lesson-{index}", measure.name, measure.source,
                        {"data": [trace], "layout": layout, "config": {"displaylogo": False, "responsive": True}})


def _growth_panel(index: int, found: Growth) -> charts.Panel:
    factor, label, hover = charts.DISPLAY.get(found.unit, (1.0, found.unit, "%{y:,.3g}"))
    trace = {"type": "scatter", "mode": "lines+markers", "x": [p[0] for p in found.points],
             "y": [p[1] * factor for p in found.points], "hovertemplate": "%{x:,} nodes: " + hover + "<extra></extra>"}
    layout = {"margin": {"l": 60, "r": 10, "t": 10, "b": 40}, "height": 260, "showlegend": False,
              "xaxis": {"title": {"text": "nodes"}}, "yaxis": {"title": {"text": label}, "rangemode": "tozero"},
              "font": {"family": charts.FONT, "size": 12}}
    return charts.Panel(f"lesson-{index}", found.measure, "measured at each step",
                        {"data": [trace], "layout": layout, "config": {"displaylogo": False, "responsive": True}})


def write_lesson_page(lesson: Lesson, folder: Path) -> Path:
    """Write folder/lesson.html (self-contained) and folder/lesson.json; return the page's path."""
    evaluated = evaluate(lesson, folder)
    record = summary(evaluated)
    (folder / LESSON_RESULTS).write_text(json.dumps(record, indent=1, default=str))
    panels = [_growth_panel(i, *what) if kind == "growth" else _bar_panel(i, *what)
              for kind, i, *what in evaluated["charted"]]
    html = page.render("lesson.html", folder=folder.name, effect_text=lambda c: times(c.effect, c.effect_prefix),
                       results_file=RESULTS_FILE, figures=charts.payload(panels), panels=panels,
                       embedded=page.embedded_folder("lesson", folder,
                                                     {"lesson": json.loads(json.dumps(record, default=str))}),
                       **evaluated)
    return page.write(folder / LESSON_PAGE, html)


def _cell(values: list[float], unit: str, bound: str = "") -> str:
    """The median of a side's runs, with their range and count where there are several."""
    if not values:
        return "—"
    def shown(value: float) -> str:
        return f"{bound} {page.in_unit(value, unit)}".lstrip()

    if len(values) == 1:
        return shown(values[0])
    return f"{shown(statistics.median(values))} ({shown(min(values))} – {shown(max(values))}, n={len(values)})"


def lessons_table(folders: list[Path]) -> str:
    """A markdown table of lessons' verdicts and deciding figures (lessons.md beside them, and the README)."""
    rows = ["| lesson | verdict | deciding figure | warned (sweep: last step) | against | effect | why |",
            "|---|---|---|---|---|---|---|"]
    for folder in folders:
        data = lesson_record(folder)
        comparisons = data["comparisons"]
        deciding = data.get("deciding") or (comparisons[0]["measure"] if comparisons else "")
        first = [c for c in comparisons if c["measure"] == deciding]
        for i, c in enumerate(first):
            effect = "×∞" if c["effect_infinite"] else times(c["effect"], c.get("effect_prefix", ""))
            fix = f"{c['against']}: {_cell(c['fix'], c['unit'], c.get('fix_bound', ''))}"
            name, verdict = (f"`{data['lesson']}`", f"**{data['verdict']}**") if i == 0 else ("", "")
            rows.append(f"| {name} | {verdict} | {c['measure'] if i == 0 else ''} | "
                        f"{_cell(c['warned'], c['unit'], c.get('warned_bound', ''))} | {fix} | {effect} | "
                        f"{c['reason'].replace('|', '/')} |")
        if not first:
            rows.append(f"| `{data['lesson']}` | **{data['verdict']}** | {deciding} | — | — | — | "
                        f"{data.get('headline', '')} |")
    return "\n".join(rows) + "\n"
