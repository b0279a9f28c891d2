"""Plotly figures as plain data (dicts), one function for every chart of the report and of compare.

The page embeds plotly.js once and calls `Plotly.newPlot` per figure, so a report opens offline. Values arrive
in base units (seconds, bytes, percent of a core, counts) and are scaled here to what a reader wants to see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadtests.analysis.figures import CHARTS, Chart, HealthLine, HealthRow, Series

if TYPE_CHECKING:
    from loadtests.analysis.projection import Projection
    from loadtests.analysis.stats import Summary

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
    "percent": (1.0, "%", "%{y:,.1f} %"),  # a PromQL figure's percent (not of a core)
    "": (1.0, "value", "%{y:,.4g}"),  # a PromQL figure of no unit the plan named
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
    # per step, the values of several runs whose median the series holds: drawn as min-max error bars
    spread: list[Summary | None] | None = None


def colours(names: list[str]) -> dict[str, str]:
    """A stable colour per series name, in first-seen order."""
    unique = list(dict.fromkeys(names))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(unique)}


def _error_bars(line: Line, factor: float, hover: str) -> tuple[dict[str, Any], str]:
    """A line's min-max error bars and their hover text (median, min-max, n), when it has a spread."""
    if line.spread is None:
        return {}, hover
    found = [(s.median, s.low, s.high, s.n) if s is not None else (0.0, 0.0, 0.0, 0) for s in line.spread]
    low_text, high_text = hover.replace("%{y", "%{customdata[0]"), hover.replace("%{y", "%{customdata[1]")
    bars = {"error_y": {"type": "data", "symmetric": False, "color": line.colour, "thickness": 1.5, "width": 5,
                        "array": [(high - median) * factor for median, _, high, _ in found],
                        "arrayminus": [(median - low) * factor for median, low, _, _ in found]},
            "customdata": [[low * factor, high * factor, n] for _, low, high, n in found]}
    return bars, f"median {hover}<br>min {low_text} – max {high_text} (n=%{{customdata[2]}})"


def by_step(lines: list[Line]) -> bool:
    """Whether lines must be drawn per step rather than against nodes: steps of the same node count (the
    phases of ClusterLoader2's load test) would stack on one point of a nodes axis."""
    return any(len(set(line.x)) < len(line.x) for line in lines)


def _trace(chart: Chart, line: Line, per_step: bool = False) -> dict[str, Any]:
    factor, _, hover = DISPLAY[chart.unit]
    x, categories = (line.categories, line.categories) if per_step else (line.x, line.categories)
    y = [None if v is None else v * factor for v in line.series.values]
    if line.series.slo_line:
        return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": line.label,
                "line": {"color": SLO_COLOUR, "dash": "dash", "width": 2}, "hoverinfo": "skip"}
    bars, hover = _error_bars(line, factor, hover)
    if chart.kind == "bar":
        bar = {"type": "bar", "x": categories, "y": y, "name": line.label, "legendgroup": line.group or line.label,
               "marker": {"color": line.colour}, "hovertemplate": f"{line.label}<br>{hover}<extra></extra>", **bars}
        if line.pattern:
            bar["marker"]["pattern"] = {"shape": line.pattern, "fgcolor": "#ffffff", "solidity": 0.3}
        return bar
    return {"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "name": line.label,
            "legendgroup": line.group or line.label, "connectgaps": False,
            "line": {"color": line.colour, "dash": line.dash, "width": 2}, "marker": {"size": 7},
            "hovertemplate": f"{line.label}<br>{hover}<br>%{{x}}{'' if per_step else ' nodes'}<extra></extra>",
            **bars}


_AXIS = {"gridcolor": "#e4e7eb", "linecolor": "#9aa5b1", "automargin": True}
_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}


def _page_style() -> dict[str, Any]:
    return {"font": {"family": FONT, "size": 12, "color": "#1f2933"}, "paper_bgcolor": "#ffffff",
            "plot_bgcolor": "#ffffff", "hovermode": "closest"}


# A log axis labels its powers of ten only; the 2s and 5s between them are unlabelled minor grid lines (labelled,
# they read as "1000, 5, 2, 100").
_LOG_TICKS = {"dtick": 1, "minor": {"dtick": "D2", "showgrid": True, "gridcolor": "#f2f4f6"}}


def _y_axis(label: str, log_y: bool) -> dict[str, Any]:
    return {"title": {"text": label}, "type": "log" if log_y else "linear", **(_LOG_TICKS if log_y else {}),
            "rangemode": "tozero", **_AXIS}


def figure(chart: Chart, lines: list[Line]) -> dict[str, Any]:
    """One chart: measurements against nodes (or grouped bars per step), with its title and source."""
    nodes = [n for line in lines for n in line.x]
    per_step = by_step(lines)
    if chart.kind == "bar" or per_step:
        xaxis = {"type": "category"}
    else:
        ticks = sorted(set(nodes))
        xaxis = {"tickmode": "array", "tickvals": ticks, "ticktext": [f"{n:,} nodes" for n in ticks],
                 "zeroline": False}
    return {"data": [_trace(chart, line, per_step) for line in lines], "layout": _layout(chart, xaxis),
            "config": _CONFIG}


def _layout(chart: Chart, xaxis: dict[str, Any]) -> dict[str, Any]:
    """The layout every chart against nodes shares: its x axis, the chart's y axis, the legend below."""
    _, axis_label, _ = DISPLAY[chart.unit]
    return {
        **_page_style(),
        "margin": {"l": 64, "r": 16, "t": 12, "b": 36},
        "height": 340,
        "xaxis": {**xaxis, **_AXIS},
        "yaxis": _y_axis(axis_label, chart.log_y),
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0, "font": {"size": 11}},
        "barmode": "group",
    }


BAND_OPACITY = 0.14


def _rgba(colour: str, alpha: float) -> str:
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def projection_figure(chart: Chart, projections: Sequence[Projection], targets: list[int]) -> dict[str, Any]:
    """Projected figures of one chart against nodes: the measured points as markers, the fit over
    the measured range solid, its extrapolation to the largest target dashed, the 95 % prediction band filled,
    the projected value at each target as an open diamond, and the chart's SLO line where it has one."""
    factor, _, hover = DISPLAY[chart.unit]
    as_line = dataclasses.replace(chart, kind="line")
    palette = colours([p.series.name for p in projections])
    measured = sorted({n for p in projections for n in p.x})
    start, end = measured[0], max([measured[-1], *targets])

    def scaled(values: list[float]) -> list[float]:
        return [v * factor for v in values]

    data: list[dict[str, Any]] = []
    for p in projections:
        colour, name = palette[p.series.name], p.series.name
        common = {"type": "scatter", "legendgroup": name, "showlegend": False}
        band_x, low, high = p.band(start, end)
        if chart.log_y:  # a log axis has no 0: the band's open bottom is drawn at a tenth of the smallest value
            floor = min(v for v in [*p.y, *high] if v > 0) / 10 if any(v > 0 for v in p.y) else 1e-12
            low = [max(v, floor) for v in low]
        data.append({**common, "mode": "lines", "x": band_x + band_x[::-1], "y": scaled(high + low[::-1]),
                     "name": f"{name} · 95 % band", "fill": "toself", "fillcolor": _rgba(colour, BAND_OPACITY),
                     "line": {"width": 0, "color": colour}, "hoverinfo": "skip"})
        fit_x, fit_y = p.curve(min(p.x), max(p.x))
        data.append({**common, "mode": "lines", "x": fit_x, "y": scaled(fit_y), "name": f"{name} · fit",
                     "line": {"color": colour, "width": 2}, "hoverinfo": "skip"})
        if p.targets:
            ext_x, ext_y = p.curve(max(p.x), max(p.targets))
            data.append({**common, "mode": "lines", "x": ext_x, "y": scaled(ext_y), "name": f"{name} · projection",
                         "line": {"color": colour, "width": 2, "dash": "dash"}, "hoverinfo": "skip"})
            at = hover.replace("%{y", "%{customdata[0]")
            low_text, high_text = hover.replace("%{y", "%{customdata[1]"), hover.replace("%{y", "%{customdata[2]")
            data.append({**common, "mode": "markers", "x": p.targets, "y": scaled(p.values),
                         "name": f"{name} · projected",
                         "customdata": [[v * factor, lo * factor, hi * factor]
                                        for v, lo, hi in zip(p.values, p.low, p.high, strict=True)],
                         "marker": {"color": colour, "size": 10, "symbol": "diamond-open", "line": {"width": 2}},
                         "hovertemplate": f"{name} projected<br>{at} (95 %: {low_text} – {high_text})"
                                          "<br>%{x:,} nodes<extra></extra>"})
        points = _trace(as_line, Line(Series(chart.id, name, list(p.y)), name, colour, p.x, []))
        data.append({**points, "mode": "markers", "marker": {"size": 8, "color": colour}})
    for threshold in sorted({p.threshold for p in projections if p.threshold is not None}):
        slo = Series(chart.id, f"SLO {threshold:g} s", [threshold, threshold], slo_line=True)
        data.append(_trace(as_line, Line(slo, slo.name, SLO_COLOUR, [start, end], [])))
    xaxis = {"tickformat": ",", "title": {"text": "nodes (dotted: projection targets)", "standoff": 4},
             "zeroline": False, "rangemode": "tozero"}
    layout = _layout(chart, xaxis)
    layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": t, "x1": t, "y0": 0, "y1": 1,
                         "line": {"color": "#9aa5b1", "width": 1, "dash": "dot"}} for t in targets]
    layout["legend"] = {**layout["legend"], "y": -0.2}
    layout["height"] = 370
    return {"data": data, "layout": layout, "config": _CONFIG}


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
               sources: dict[str, str] | None = None,
               spreads: dict[str, list[Summary | None]] | None = None, dashed: bool = False) -> list[Panel]:
    """The charts of one run, colours assigned per chart; or of several runs drawn as their medians, when
    `spreads` holds each series' values per step (by Series.key) for min-max error bars; `dashed` draws them as
    compare draws side B (dashed lines, hatched bars)."""
    by_chart: dict[str, list[Series]] = {}
    for s in all_series:
        by_chart.setdefault(s.chart, []).append(s)
    groups = {}
    for chart, members in by_chart.items():
        palette = colours([s.name for s in members if not s.slo_line])
        groups[chart] = [Line(s, s.name, palette.get(s.name, SLO_COLOUR), nodes, step_labels,
                              spread=(spreads or {}).get(s.key), dash="dash" if dashed else "solid",
                              pattern="/" if dashed else "", group=s.name if dashed else "") for s in members]
    return panels(groups, sources)


def payload(found: list[Panel]) -> list[dict[str, Any]]:
    """What the page script hands to Plotly.newPlot, one entry per panel (embedded as JSON)."""
    return [{"id": p.id, "figure": p.figure} for p in found]


ROLL_MARK_COLOUR = "#9aa5b1"


def roll_figure(times: list[int], slowest_ms: list[float | None], failed: list[int], steady_top_ms: float | None,
                marks: list[tuple[str, float, float]]) -> dict[str, Any]:
    """A rolling upgrade's seconds: the probe's slowest answer per second (with the steady range's top) over its
    failed requests per second, each replaced instance a shaded band from out of rotation to back in."""
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers", "x": times, "y": slowest_ms, "name": "slowest probe",
         "yaxis": "y", "connectgaps": False, "marker": {"size": 4}, "line": {"color": PALETTE[0], "width": 1.5},
         "hovertemplate": "slowest probe %{y:,.1f} ms<br>%{x} s<extra></extra>"},
        {"type": "bar", "x": times, "y": failed, "name": "probe requests failed", "yaxis": "y2",
         "marker": {"color": SLO_COLOUR}, "hovertemplate": "%{y} failed<br>%{x} s<extra></extra>"},
    ]
    if steady_top_ms is not None and times:
        data.append({"type": "scatter", "mode": "lines", "x": [times[0], times[-1]], "y": [steady_top_ms] * 2,
                     "name": "steady range (slowest before the roll)", "yaxis": "y",
                     "line": {"color": PALETTE[2], "width": 1.5, "dash": "dash"}, "hoverinfo": "skip"})
    shapes, annotations = [], []
    for instance, out_at, back_at in marks:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": out_at, "x1": back_at, "y0": 0, "y1": 1,
                       "fillcolor": _rgba(ROLL_MARK_COLOUR, 0.18), "line": {"width": 0}, "layer": "below"})
        annotations.append({"text": instance.replace("kube-", ""), "x": out_at, "xref": "x", "y": 1.0,
                            "yref": "paper", "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                            "textangle": -30, "font": {"size": 10, "color": "#52606d"}})
    layout = {
        **_page_style(),
        "margin": {"l": 64, "r": 16, "t": 48, "b": 44},
        "height": 380,
        "xaxis": {"title": {"text": "seconds since the window opened"}, "zeroline": False, **_AXIS,
                  "anchor": "y2"},  # drawn under the lower row
        "yaxis": {**_y_axis("ms", False), "domain": [0.34, 1.0], "anchor": "x"},
        "yaxis2": {**_y_axis("failed", False), "domain": [0.0, 0.26], "anchor": "x"},
        "shapes": shapes, "annotations": annotations,
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0, "font": {"size": 11}},
    }
    return {"data": data, "layout": layout, "config": _CONFIG}


# ---- a history of runs: each figure across the runs, its change points marked ---------------------------------

BOUND_SYMBOLS = {"": "circle", "<": "triangle-down-open", ">": "triangle-up-open", "–": "diamond-open"}
HISTORY_FLAT_TICKS = 12  # up to this many runs their labels fit upright; beyond, plotly turns them
CHANGE_COLOURS = {"bad": SLO_COLOUR, "warn": "#E69F00", "better": "#009E73", "skip": "#9aa5b1"}


@dataclass
class HistoryLine:
    """One step's values of a figure across the runs: x is each value's position in the history."""

    label: str
    colour: str
    x: list[int]
    values: list[float]
    bounds: list[str]  # per value: "" or the histogram bound it only is ("<", ">", "–"), drawn as an open symbol
    hover: list[str]  # per value: the run and the value in words


@dataclass
class HistoryMark:
    """A change point: a vertical line just before the run that starts the new segment, and a marker on it."""

    position: int  # the run that starts the new segment
    value: float  # the line's value at that run
    state: str  # a key of CHANGE_COLOURS
    text: str  # "500 nodes: +60 % (regression)"


def history_figure(chart: Chart, lines: list[HistoryLine], ticks: list[str],
                   marks: list[HistoryMark]) -> dict[str, Any]:
    """A figure across the runs of a history, a line per step, each change point a dashed vertical line coloured by
    its verdict (red regression, amber worse within the margin, green better, grey a histogram bound)."""
    factor, _, hover = DISPLAY[chart.unit]
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers", "x": line.x, "y": [v * factor for v in line.values],
         "name": line.label, "legendgroup": line.label, "text": line.hover, "connectgaps": False,
         "line": {"color": line.colour, "width": 2},
         "marker": {"size": 7, "color": line.colour, "symbol": [BOUND_SYMBOLS.get(b, "circle") for b in line.bounds]},
         "hovertemplate": f"%{{text}}<br>{hover}<extra>{line.label}</extra>"}
        for line in lines
    ]
    if marks:
        data.append({"type": "scatter", "mode": "markers", "x": [m.position for m in marks],
                     "y": [m.value * factor for m in marks], "name": "change point", "text": [m.text for m in marks],
                     "marker": {"size": 13, "symbol": "x-thin-open", "line": {"width": 3},
                                "color": [CHANGE_COLOURS[m.state] for m in marks]},
                     "hovertemplate": "change point<br>%{text}<extra></extra>"})
    xaxis = {"tickmode": "array", "tickvals": list(range(len(ticks))), "ticktext": ticks, "zeroline": False,
             "range": [-0.5, len(ticks) - 0.5], "tickfont": {"size": 10},
             **({"tickangle": 0} if len(ticks) <= HISTORY_FLAT_TICKS else {})}
    layout = _layout(chart, xaxis)
    if chart.log_y:  # a history spans a narrow range: plotly's own log ticks label it, powers of ten would not
        layout["yaxis"] = {key: value for key, value in layout["yaxis"].items() if key not in _LOG_TICKS}
    layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": m.position - 0.5, "x1": m.position - 0.5,
                         "y0": 0, "y1": 1, "line": {"color": CHANGE_COLOURS[m.state], "width": 2, "dash": "dash"}}
                        for m in marks]
    # the legend above the plot: the runs' two-line labels take the room below it
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "font": {"size": 11}}
    layout["margin"] = {**layout["margin"], "t": 28}
    layout["height"] = 360
    return {"data": data, "layout": layout, "config": _CONFIG}


SOAK_UNITS = {"bytes": "bytes", "s": "s", "%": "%", "count": "count"}  # a soak series' unit -> its DISPLAY


def soak_figure(unit: str, hours: list[float], values: list[float | None], colour: str = PALETTE[0]) -> dict[str, Any]:
    """A soak series against the hours since its window opened (downsampled for the page: analysis/soak.py)."""
    factor, axis_label, hover = DISPLAY[SOAK_UNITS.get(unit, "")]
    trace = {"type": "scatter", "mode": "lines", "x": hours, "line": {"color": colour, "width": 1.5},
             "y": [None if v is None else v * factor for v in values], "hovertemplate": hover + "<extra></extra>",
             "connectgaps": False}
    return {"data": [trace], "config": _CONFIG,
            "layout": {**_page_style(), "margin": {"l": 64, "r": 16, "t": 12, "b": 36}, "height": 260,
                       "showlegend": False, "xaxis": {"title": {"text": "hours"}, "zeroline": False, **_AXIS},
                       "yaxis": _y_axis(axis_label, False)}}
