"""The projections' view: their table rows, charts and CPU note on the run report (the fits are
analysis/projection.py)."""

from __future__ import annotations

from typing import Any

from loadtests.analysis.figures import CHARTS
from loadtests.analysis.projection import (
    CPU_BOUND_SHARE,
    CROSSING_LIMIT_NODES,
    LOO_LIMIT_PER_DOUBLING,
    MIN_POINTS,
    NOT_PROJECTABLE,
    OTHER_MODEL_SHOWN,
    Abstention,
    Fit,
    Projection,
    RunProjection,
    cpu_note,
    node_list,
    project,
    share,
)
from loadtests.report import charts, page
from loadtests.results import RunResult

CHART_SERIES = 3  # figures drawn per projection chart (the largest projected ones); the table has them all


def _crossing_text(p: Projection) -> str:
    if p.threshold is None:
        return "—"
    if p.crossing is None:
        return "none" if p.fit.b <= 0 else f"beyond {CROSSING_LIMIT_NODES:,} nodes"
    if p.crossing <= max(p.x):
        return "at or below the measured scales"
    rounded = float(f"{p.crossing:.3g}")
    return f"≈ {rounded:,.0f} nodes"


def _model_text(model: Fit, unit: str) -> str:
    """The chosen model, and the other's share of the averaged band where it moves the band (5 % or more)."""
    text = model.describe(unit)
    others = [(m, w) for m, w in zip(model.candidates, model.weights, strict=True) if m.model != model.model]
    if others and others[0][1] >= OTHER_MODEL_SHOWN:
        other, weight = others[0]
        text += f" · {'power law' if other.model == 'power' else 'linear'} weighs {share(weight)}"
    return text


def _rows(found: RunProjection) -> list[dict[str, Any]]:
    rows = []
    for f in found.figures:
        unit = f.chart.unit
        model = f.fit
        row: dict[str, Any] = {
            "figure": f.label, "model": _model_text(model, unit) if model else "—",
            "r2": f"{model.r2:.3f}" if model else "—", "points": len(f.x), "nodes_used": node_list(f.x),
            "loo": share(model.loo_per_doubling) if model and model.left_out else "—",
            "cpu_bound": f.cpu_bound, "abstain": "", "cells": [], "threshold": "—", "crossing": "—",
            "crossing_bad": False,
        }
        if isinstance(f, Abstention):
            row["abstain"] = f.text
        else:
            row["cells"] = [(page.in_unit(value, unit), f"{page.in_unit(low, unit)} – {page.in_unit(high, unit)}")
                            for value, low, high in zip(f.values, f.low, f.high, strict=True)]
            row.update(threshold=page.in_unit(f.threshold, unit) if f.threshold is not None else "—",
                       crossing=_crossing_text(f),
                       crossing_bad=f.crossing is not None and f.crossing <= max([*found.targets, *f.x]))
        rows.append(row)
    return rows


def _largest(p: Projection) -> float:
    """How large a figure gets: its projected value at the largest target, or its largest measured value."""
    return p.values[-1] if p.values else max(p.y)


def panels(found: RunProjection) -> list[charts.Panel]:
    """A chart per source chart, in CHARTS order: every projected figure of that chart on one set of axes."""
    by_chart: dict[str, list[Projection]] = {}
    for p in found.projections:
        by_chart.setdefault(p.chart.id, []).append(p)
    result = []
    for chart_id, members in by_chart.items():
        chart = CHARTS[chart_id]
        source = chart.source
        if len(members) > CHART_SERIES:  # overlapping bands of many figures hide each other
            members = sorted(members, key=lambda p: -_largest(p))[:CHART_SERIES]
            source += f" · the {CHART_SERIES} largest of {len(by_chart[chart_id])} figures (all in the table)"
        abstained = [a.series.name for a in found.abstained if a.chart.id == chart_id]
        if abstained:
            source += f" · {NOT_PROJECTABLE} (see the table): {', '.join(abstained)}"
        result.append(charts.Panel(f"chart-projection_{chart_id}", f"Projection: {chart.title}", source,
                                   charts.projection_figure(chart, members, found.targets)))
    return result


def view(run: RunResult) -> dict[str, Any]:
    """What the report's Projection section shows."""
    found = project(run)
    return {
        "reason": found.reason,
        "targets": found.targets,
        "measured_nodes": found.measured_nodes,
        "rows": _rows(found),
        "flat": found.flat,
        "cpu_note": cpu_note(found) if found.figures else "",
        "panels": panels(found),
        "loo_limit": share(LOO_LIMIT_PER_DOUBLING),
        "not_projectable": NOT_PROJECTABLE,
        "min_points": MIN_POINTS,
        "cpu_share": f"{CPU_BOUND_SHARE * 100:.0f} %",
    }
