"""Plotly figures as plain data (dicts), one function for every chart of the report and of compare.

The page embeds plotly.js once and calls `Plotly.newPlot` per figure, so a report opens offline. Values arrive
in base units (seconds, bytes, percent of a core, counts) and are scaled here to what a reader wants to see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtests.report.figures import CHARTS, Chart, HealthLine, HealthRow, Series

# Colour-blind-safe palette (Okabe-Ito, then Tableau), assigned per chart by series name, so A and B match.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#4E79A7", "#F28E2B", "#59A14F", "#B07AA1", "#76B7B2", "#EDC948", "#9C755F", "#BAB0AC")
SLO_COLOUR = "#C62828"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"

# base unit -> (factor, axis label, hover format)
DISPLAY = {
    "s": (1000.0, "ms", "%{y:,.1f} ms"),
    "s_long": (1.0, "s", "%{y:,.1f} s"),  # durations of seconds and more (a Lease's age)
    "bytes": (1.0 / 2**20, "MiB", "%{y:,.1f} MiB"),
    "%": (1.0, "% of one core", "%{y:,.1f} %"),
    "count": (1.0, "count", "%{y:,.0f}"),
}


@dataclass
class Line:
    """A trace to draw: a series of one run, with its styling (compare draws run B dashed)."""

    series: Series
    label: str
    colour: str
    x: list[int]  # nodes of the steps the values belong to
    categories: list[str]  # step names, for grouped bars
    dash: str = "solid"
    pattern: str = ""  # bar fill pattern, for run B in grouped bars
    group: str = ""


def colours(names: list[str]) -> dict[str, str]:
    """A stable colour per series name, in first-seen order."""
    unique = list(dict.fromkeys(names))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(unique)}


def _trace(chart: Chart, line: Line) -> dict[str, Any]:
    factor, _, hover = DISPLAY[chart.unit]
    x, categories = line.x, line.categories
    y = [None if v is None else v * factor for v in line.series.values]
    if line.series.slo_line:
        return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": line.label,
                "line": {"color": SLO_COLOUR, "dash": "dash", "width": 2}, "hoverinfo": "skip"}
    if chart.kind == "bar":
        bar = {"type": "bar", "x": categories, "y": y, "name": line.label, "legendgroup": line.group or line.label,
               "marker": {"color": line.colour}, "hovertemplate": f"{line.label}<br>{hover}<extra></extra>"}
        if line.pattern:
            bar["marker"]["pattern"] = {"shape": line.pattern, "fgcolor": "#ffffff", "solidity": 0.3}
        return bar
    return {"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "name": line.label,
            "legendgroup": line.group or line.label, "connectgaps": False,
            "line": {"color": line.colour, "dash": line.dash, "width": 2}, "marker": {"size": 7},
            "hovertemplate": f"{line.label}<br>{hover}<br>%{{x}} nodes<extra></extra>"}


_AXIS = {"gridcolor": "#e4e7eb", "linecolor": "#9aa5b1", "automargin": True}
_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}


def _page_style() -> dict[str, Any]:
    return {"font": {"family": FONT, "size": 12, "color": "#1f2933"}, "paper_bgcolor": "#ffffff",
            "plot_bgcolor": "#ffffff", "hovermode": "closest"}


def _y_axis(label: str, log_y: bool) -> dict[str, Any]:
    return {"title": {"text": label}, "type": "log" if log_y else "linear", **({"dtick": "D2"} if log_y else {}),
            "rangemode": "tozero", **_AXIS}


def figure(chart: Chart, lines: list[Line]) -> dict[str, Any]:
    """One chart: measurements against nodes (or grouped bars per step), with its title and source."""
    _, axis_label, _ = DISPLAY[chart.unit]
    nodes = [n for line in lines for n in line.x]
    if chart.kind == "bar":
        xaxis = {"type": "category"}
    else:
        ticks = sorted(set(nodes))
        xaxis = {"tickmode": "array", "tickvals": ticks, "ticktext": [f"{n:,} nodes" for n in ticks],
                 "zeroline": False}
    layout = {
        **_page_style(),
        "margin": {"l": 64, "r": 16, "t": 12, "b": 36},
        "height": 340,
        "xaxis": {**xaxis, **_AXIS},
        "yaxis": _y_axis(axis_label, chart.log_y),
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0, "font": {"size": 11}},
        "barmode": "group",
    }
    return {"data": [_trace(chart, line) for line in lines], "layout": layout, "config": _CONFIG}


HEALTH_ROW_PX, HEALTH_GAP = 165, 0.05


def health_figure(rows: list[tuple[HealthRow, list[HealthLine]]], times: list[float]) -> dict[str, Any]:
    """A step's health over time: one row per unit, stacked on one time axis, each row with its own legend."""
    count = len(rows)
    height = HEALTH_ROW_PX * count + 60
    span = (1.0 - HEALTH_GAP * (count - 1)) / count
    layout: dict[str, Any] = {
        **_page_style(),
        "margin": {"l": 64, "r": 210, "t": 22, "b": 44},
        "height": height,
        "xaxis": {"title": {"text": "seconds since the window opened"}, "zeroline": False, **_AXIS,
                  "anchor": f"y{count}" if count > 1 else "y"},  # drawn under the last row
        "annotations": [],
    }
    data = []
    for i, (row, lines) in enumerate(rows):
        top = 1.0 - i * (span + HEALTH_GAP)
        factor, axis_label, hover = DISPLAY[row.unit]
        suffix = "" if i == 0 else str(i + 1)
        layout[f"yaxis{suffix}"] = {**_y_axis(axis_label, row.log_y), "domain": [max(0.0, top - span), top],
                                    "anchor": "x"}
        layout[f"legend{suffix}"] = {"x": 1.01, "xanchor": "left", "y": top, "yanchor": "top",
                                     "font": {"size": 10}, "tracegroupgap": 0}
        layout["annotations"].append({"text": f"<b>{row.title}</b>", "xref": "paper", "yref": "paper", "x": 0,
                                      "y": top, "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                                      "font": {"size": 11}})
        palette = colours([line.label for line in lines if not line.threshold])
        for line in lines:
            y = [None if v is None else v * factor for v in line.values]
            colour = SLO_COLOUR if line.threshold else palette[line.label]
            data.append({"type": "scatter", "mode": "lines" if line.threshold else "lines+markers", "x": times,
                         "y": y, "name": line.label, "xaxis": "x", "yaxis": f"y{suffix}", "legend": f"legend{suffix}",
                         "connectgaps": False, "marker": {"size": 5},
                         "line": {"color": colour, "width": 2, "dash": "dash" if line.threshold else "solid"},
                         "hovertemplate": f"{line.label}<br>{hover}<br>%{{x:.0f}} s<extra></extra>"})
    return {"data": data, "layout": layout, "config": _CONFIG}


@dataclass
class Panel:
    """A chart ready for the template: heading, source line and the figure data."""

    id: str
    title: str
    source: str
    figure: dict[str, Any]


def panels(groups: dict[str, list[Line]], sources: dict[str, str] | None = None) -> list[Panel]:
    """A panel per chart that has something to draw, in CHARTS order; `sources` overrides a chart's source."""
    found = []
    for chart in CHARTS.values():
        lines = groups.get(chart.id)
        if not lines or all(line.series.slo_line for line in lines):
            continue
        source = (sources or {}).get(chart.id, chart.source)
        found.append(Panel(f"chart-{chart.id}", chart.title, source, figure(chart, lines)))
    return found


def run_panels(all_series: list[Series], nodes: list[int], step_labels: list[str],
               sources: dict[str, str] | None = None) -> list[Panel]:
    """The charts of one run, colours assigned per chart."""
    by_chart: dict[str, list[Series]] = {}
    for s in all_series:
        by_chart.setdefault(s.chart, []).append(s)
    groups = {}
    for chart, members in by_chart.items():
        palette = colours([s.name for s in members if not s.slo_line])
        groups[chart] = [Line(s, s.name, palette.get(s.name, SLO_COLOUR), nodes, step_labels) for s in members]
    return panels(groups, sources)


def payload(found: list[Panel]) -> list[dict[str, Any]]:
    """What the page script hands to Plotly.newPlot, one entry per panel (embedded as JSON)."""
    return [{"id": p.id, "figure": p.figure} for p in found]
