"""Projections of this run's measured growth to larger scales: a fitted curve per figure, with a band.

A run measures a few steps; readers want to know what happens at the scale they plan for. Each growing figure
(memory, etcd size and keys, objects in storage, server-side and pod-startup p99, watch delay, CPU) is fitted
against nodes with the simpler of two models, whichever fits the measured points better in the figure's own
units:

- linear, y = a + b·x (costs per node: objects, bytes);
- power law, y = a·x^b, fitted in log-log space (super- or sub-linear growth), only when every x and y is > 0.

The band around each projected value is the 95 % prediction interval of the fit (Student t, from the
residuals), so three steps give a wide band and noisy steps a wider one: an extrapolation should look as
uncertain as it is. Figures with an SLO threshold also get the scale at which the fitted curve crosses it.

Every number comes from `figures.series(run)`, the one place a report reads figures out of results; only steps
that were measured (not saturated) count. Nothing here is stored: projections are recomputed from results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from loadtests.plan import default_project_to
from loadtests.report import charts, page
from loadtests.report.figures import CHARTS, Chart, Series, series
from loadtests.report.slo import thresholds
from loadtests.results import RunResult, StepResult

MIN_POINTS = 3  # two points always fit a line exactly: no residual, no band, no honest choice of model
CROSSING_LIMIT_NODES = 1_000_000  # a crossing further out than this is reported as none
CPU_BOUND_SHARE = 0.85  # machine CPU at or above this share of all its cores: the machine sets the pace
CURVE_POINTS = 60
CHART_SERIES = 3  # figures drawn per projection chart (the largest projected ones); the table has them all

# Student-t 0.975 quantiles (two-sided 95 %) for 1..30 degrees of freedom; the normal 1.96 beyond.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z_975 = 1.96

# The charts whose figures grow with scale, and within a chart the series worth projecting (None: all).
PROJECTED: dict[str, frozenset[str] | None] = {
    "server_mutating": None,
    "server_read_resource": None,
    "server_read_namespace": None,
    "server_read_cluster": None,
    "pod_startup": frozenset({"p99"}),
    "watch_delay": frozenset({"p99"}),
    "etcd_size": frozenset({"DB size (total)"}),
    "etcd_keys": None,
    "apiserver_memory": frozenset({"RSS"}),
    "cpu": None,
    "storage_objects": None,
}
# Figures that measure time or CPU: on a saturated machine their growth is the machine's, not the control plane's.
CPU_SENSITIVE = frozenset({"server_mutating", "server_read_resource", "server_read_namespace", "server_read_cluster",
                           "pod_startup", "watch_delay", "cpu"})


def t_quantile(df: int) -> float:
    """Two-sided 95 % Student-t quantile; the normal value past the table."""
    if df < 1:
        raise ValueError(f"a prediction interval needs at least one degree of freedom (got {df})")
    return T_975[df - 1] if df <= len(T_975) else Z_975


@dataclass(frozen=True)
class Fit:
    """A fitted model of y against nodes, with what its prediction interval needs.

    linear: y = a + b·x; power: y = a·x^b, fitted as log y = log a + b·log x. `s`, `x_mean` and `sxx` are in
    the space the model was fitted in (log space for the power law), so the band is computed there too.
    """

    model: str  # "linear" | "power"
    a: float
    b: float
    r2: float  # of the predictions against the measured values, in the figure's own units
    rss: float  # residual sum of squares, in the figure's own units (what chose the model)
    n: int
    s: float  # residual standard error in fitting space
    x_mean: float
    sxx: float

    def predict(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self.model == "power":
            return self.a * np.power(x, self.b)
        return self.a + self.b * x

    def interval(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """95 % prediction interval at x: where a new measurement at that scale would fall, given this fit."""
        x = np.asarray(x, dtype=float)
        u = np.log(x) if self.model == "power" else x
        half = t_quantile(self.n - 2) * self.s * np.sqrt(1 + 1 / self.n + (u - self.x_mean) ** 2 / self.sxx)
        if self.model == "power":
            centre = np.log(self.a) + self.b * u
            return np.exp(centre - half), np.exp(centre + half)
        centre = self.a + self.b * u
        return centre - half, centre + half

    def crossing(self, threshold: float, limit: float = CROSSING_LIMIT_NODES) -> float | None:
        """Nodes at which the fitted curve reaches `threshold`; None if it falls or stays flat, or crosses
        beyond `limit`. 0 when the curve is above the threshold at every scale."""
        if self.b <= 0:
            return None
        if self.model == "power":
            if threshold <= 0:
                return 0.0
            x = (threshold / self.a) ** (1 / self.b)
        else:
            x = (threshold - self.a) / self.b
        if not math.isfinite(x) or x > limit:
            return None
        return max(0.0, x)

    def describe(self, unit: str) -> str:
        """The model in words, with its growth in the figure's unit."""
        if self.model == "power":
            return f"power law: ∝ nodes^{self.b:.2f}"
        return f"linear: {'+' if self.b >= 0 else ''}{page.in_unit(self.b * 1000, unit)} per 1,000 nodes"


def _fit_linear(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, float]:
    """Least squares a + b·x: (a, b, residual standard error, mean x, Sxx)."""
    x_mean = float(x.mean())
    sxx = float(((x - x_mean) ** 2).sum())
    b = float(((x - x_mean) * (y - y.mean())).sum() / sxx)
    if abs(b) * (x.max() - x.min()) <= 1e-12 * max(1e-300, float(np.abs(y).max())):
        b = 0.0  # rounding noise of a flat series, not growth
    a = float(y.mean() - b * x_mean)
    residuals = y - (a + b * x)
    s = math.sqrt(float((residuals ** 2).sum()) / (len(x) - 2))
    return a, b, s, x_mean, sxx


def _quality(y: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(R², residual sum of squares) in the figure's own units, the same measure for either model."""
    rss = float(((y - predicted) ** 2).sum())
    sst = float(((y - y.mean()) ** 2).sum())
    if sst == 0:
        return (1.0 if rss <= 1e-12 * max(1.0, float((y ** 2).sum())) else 0.0), rss
    return 1 - rss / sst, rss


def fit(x: Sequence[float], y: Sequence[float]) -> Fit | None:
    """The better of a linear and a power-law fit of y against x; None with fewer than 3 distinct x."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) != len(ys) or len(np.unique(xs)) < MIN_POINTS:
        return None
    n = len(xs)
    a, b, s, x_mean, sxx = _fit_linear(xs, ys)
    r2, rss = _quality(ys, a + b * xs)
    best = Fit("linear", a, b, r2, rss, n, s, x_mean, sxx)
    if (xs > 0).all() and (ys > 0).all():
        la, lb, ls, lx_mean, lsxx = _fit_linear(np.log(xs), np.log(ys))
        power = Fit("power", math.exp(la), lb, 0.0, 0.0, n, ls, lx_mean, lsxx)
        p_r2, p_rss = _quality(ys, power.predict(xs))
        # the simpler linear model wins ties (y = b·x is both)
        if p_rss < rss * (1 - 1e-9):
            best = Fit("power", power.a, lb, p_r2, p_rss, n, ls, lx_mean, lsxx)
    return best


@dataclass
class Projection:
    """One figure fitted over the measured steps and projected to the target scales."""

    series: Series
    chart: Chart
    x: list[int]  # nodes of the steps used
    y: list[float]
    fit: Fit
    targets: list[int]
    values: list[float]
    low: list[float]  # 95 % prediction interval, floored at 0 (every projected figure is non-negative)
    high: list[float]
    threshold: float | None = None  # the SLO the figure is judged against, if any
    crossing: float | None = None  # nodes at which the fitted curve reaches the threshold
    cpu_bound: bool = False  # a time or CPU figure fitted over steps where this machine's CPU was saturated

    @property
    def label(self) -> str:
        return f"{self.chart.short} {self.series.name}"

    def curve(self, start: float, end: float, points: int = CURVE_POINTS) -> tuple[list[float], list[float]]:
        """The fitted curve between two scales, for drawing."""
        x = np.linspace(start, end, points)
        return x.tolist(), self.fit.predict(x).tolist()

    def band(self, start: float, end: float, points: int = CURVE_POINTS) -> tuple[list[float], list[float],
                                                                                    list[float]]:
        x = np.linspace(start, end, points)
        low, high = self.fit.interval(x)
        return x.tolist(), np.maximum(low, 0.0).tolist(), high.tolist()


@dataclass
class RunProjection:
    """Every projection of a run, or the reason there is none."""

    targets: list[int]
    measured_nodes: list[int]
    projections: list[Projection] = field(default_factory=list)
    reason: str = ""  # why nothing was projected
    skipped: list[str] = field(default_factory=list)  # figures with fewer than MIN_POINTS values
    flat: list[str] = field(default_factory=list)  # figures with the same value at every measured step
    cpu_bound_nodes: list[int] = field(default_factory=list)  # measured steps where the machine was saturated
    cpu_known: bool = False  # machine CPU recorded for at least one measured step
    cpus: int | None = None

    def table(self) -> pd.DataFrame:
        """One row per projected figure: model, fit quality, points used, value and band at each target,
        the SLO threshold and the scale at which the fit crosses it, the CPU-bound flag."""
        records = []
        for p in self.projections:
            row: dict[str, Any] = {
                "figure": p.label, "chart": p.chart.id, "unit": p.chart.unit, "model": p.fit.model,
                "a": p.fit.a, "b": p.fit.b, "r2": p.fit.r2, "points": len(p.x),
                "nodes_used": ", ".join(f"{n:,}" for n in p.x),
            }
            for target, value, low, high in zip(p.targets, p.values, p.low, p.high, strict=True):
                row[f"at_{target}"], row[f"low_{target}"], row[f"high_{target}"] = value, low, high
            row.update(threshold=p.threshold, crossing_nodes=p.crossing, cpu_bound=p.cpu_bound)
            records.append(row)
        columns = ["figure", "chart", "unit", "model", "a", "b", "r2", "points", "nodes_used",
                   *(f"{k}_{t}" for t in self.targets for k in ("at", "low", "high")),
                   "threshold", "crossing_nodes", "cpu_bound"]
        return pd.DataFrame.from_records(records, columns=columns)


def targets(run: RunResult) -> list[int]:
    """The plan's `project_to`, or for results written before it existed the default scales beyond the plan's
    largest step."""
    plan = run.plan if isinstance(run.plan, dict) else {}
    stored = plan.get("project_to")
    if isinstance(stored, list):
        return sorted({int(n) for n in stored})
    planned = [s.get("nodes") for s in plan.get("steps") or [] if isinstance(s, dict)]
    largest = max([n for n in planned if isinstance(n, int | float)] + [s.nodes for s in run.steps], default=0)
    return default_project_to(largest)


def machine_cpus(run: RunResult, step: StepResult) -> int | None:
    machine = run.environment.get("machine") if isinstance(run.environment, dict) else None
    cpus = machine.get("cpus") if isinstance(machine, dict) else None
    cpus = cpus or step.health.summary.get("cpus")
    return int(cpus) if isinstance(cpus, int | float) and cpus > 0 else None


def cpu_bound(run: RunResult, step: StepResult) -> bool | None:
    """Was the machine's CPU near its capacity through the step (average ≥ 85 % of all cores)? None: unknown."""
    average = step.health.summary.get("cpu_machine_avg")
    cpus = machine_cpus(run, step)
    if not isinstance(average, int | float) or cpus is None:
        return None
    return average >= CPU_BOUND_SHARE * 100.0 * cpus


def _threshold(chart: str, name: str, limits: dict[str, float]) -> float | None:
    if chart.startswith("server_"):
        return float(limits[chart.removeprefix("server_") + "_p99_s"])
    if chart == "pod_startup" and name == "p99":
        return float(limits["pod_startup_p99_s"])
    return None


def project(run: RunResult, to: list[int] | None = None) -> RunProjection:
    """Fit every growing figure over the run's measured steps and project it to `to` (default: the plan's
    targets)."""
    scales = sorted(set(to)) if to is not None else targets(run)
    measured = [(i, step) for i, step in enumerate(run.steps) if step.status == "measured"]
    found = RunProjection(targets=scales, measured_nodes=[step.nodes for _, step in measured])
    bound = {step.nodes: cpu_bound(run, step) for _, step in measured}
    found.cpu_known = any(v is not None for v in bound.values())
    found.cpu_bound_nodes = sorted(n for n, v in bound.items() if v)
    found.cpus = next((c for _, step in measured if (c := machine_cpus(run, step))), None)
    scales_measured = len({step.nodes for _, step in measured})
    if scales_measured < MIN_POINTS:
        at = "" if scales_measured == len(measured) else f" at {scales_measured} scale(s)"
        found.reason = (f"A projection needs at least {MIN_POINTS} measured steps at different scales; this run "
                        f"has {len(measured)}{at}, so nothing is projected.")
        return found
    limits = thresholds(run)
    for s in series(run):
        wanted = PROJECTED.get(s.chart, frozenset())
        if s.slo_line or (wanted is not None and s.name not in wanted):
            continue
        points = [(step.nodes, float(s.values[i])) for i, step in measured if s.values[i] is not None]
        chart = CHARTS[s.chart]
        model = fit([p[0] for p in points], [p[1] for p in points]) if len(points) >= MIN_POINTS else None
        if model is None:
            found.skipped.append(f"{chart.short} {s.name}")
            continue
        if len({p[1] for p in points}) == 1:  # nothing grew: its projection is the value itself
            found.flat.append(f"{chart.short} {s.name}")
            continue
        low, high = model.interval(scales) if scales else (np.array([]), np.array([]))
        threshold = _threshold(s.chart, s.name, limits)
        found.projections.append(Projection(
            series=s, chart=chart, x=[p[0] for p in points], y=[p[1] for p in points], fit=model, targets=scales,
            values=model.predict(scales).tolist() if scales else [],
            low=np.maximum(low, 0.0).tolist(), high=high.tolist(), threshold=threshold,
            crossing=model.crossing(threshold) if threshold is not None else None,
            cpu_bound=s.chart in CPU_SENSITIVE and any(bound.get(n) for n, _ in points)))
    if not found.projections:
        found.reason = f"No figure had values at {MIN_POINTS} or more measured steps, so nothing is projected."
    return found


# ---- the report's view --------------------------------------------------------------------------------------


def _crossing_text(p: Projection) -> str:
    if p.threshold is None:
        return "—"
    if p.crossing is None:
        return "none" if p.fit.b <= 0 else f"beyond {CROSSING_LIMIT_NODES:,} nodes"
    if p.crossing <= max(p.x):
        return "at or below the measured scales"
    rounded = float(f"{p.crossing:.3g}")
    return f"≈ {rounded:,.0f} nodes"


def cpu_note(found: RunProjection) -> str:
    """Which figures are CPU-bound on this machine, in one sentence a reader can act on."""
    if not found.cpu_known:
        return ("Machine CPU was not recorded for these steps, so whether the latency and CPU growth reflect this "
                "machine's limit rather than the control plane's is unknown.")
    share = f"{CPU_BOUND_SHARE * 100:.0f} %"
    capacity = f"{share} of its {found.cpus} cores" if found.cpus else share
    if not found.cpu_bound_nodes:
        return f"No measured step was CPU-bound: the machine's CPU stayed below {capacity} at every step."
    flagged = [p.label for p in found.projections if p.cpu_bound]
    steps = ", ".join(f"{n:,}" for n in found.cpu_bound_nodes)
    if not flagged:
        return f"The machine was CPU-bound (at or above {capacity}) at {steps} nodes; no projected figure is affected."
    return (f"CPU-bound on this machine (average CPU at or above {capacity} at {steps} nodes): "
            f"{', '.join(flagged)}. Their growth says more about this machine than about the control plane.")


def _rows(found: RunProjection) -> list[dict[str, Any]]:
    rows = []
    for record, p in zip(found.table().to_dict("records"), found.projections, strict=True):
        unit = record["unit"]
        cells = [(page.in_unit(record[f"at_{t}"], unit),
                  f"{page.in_unit(record[f'low_{t}'], unit)} – {page.in_unit(record[f'high_{t}'], unit)}")
                 for t in found.targets]
        rows.append({"figure": record["figure"], "model": p.fit.describe(unit), "r2": f"{record['r2']:.3f}",
                     "points": record["points"], "nodes_used": record["nodes_used"], "cells": cells,
                     "threshold": page.in_unit(p.threshold, unit) if p.threshold is not None else "—",
                     "crossing": _crossing_text(p),
                     "crossing_bad": p.crossing is not None and p.crossing <= max([*found.targets, *p.x]),
                     "cpu_bound": record["cpu_bound"]})
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
        flagged = any(p.cpu_bound for p in members)
        source = chart.source + (" · fitted over CPU-bound steps" if flagged else "")
        if len(members) > CHART_SERIES:  # overlapping bands of many figures hide each other
            members = sorted(members, key=lambda p: -_largest(p))[:CHART_SERIES]
            source += f" · the {CHART_SERIES} largest of {len(by_chart[chart_id])} figures (all in the table)"
        result.append(charts.Panel(f"chart-projection_{chart_id}", f"Projection: {chart.title}", source,
                                   charts.projection_figure(chart, members, found.targets)))
    return result


def view(run: RunResult) -> dict[str, Any]:
    """What the report's Projection section shows."""
    found = project(run)
    enough = bool(found.projections)
    return {
        "reason": found.reason,
        "targets": found.targets,
        "measured_nodes": found.measured_nodes,
        "rows": _rows(found) if enough else [],
        "skipped": found.skipped,
        "flat": found.flat,
        "cpu_note": cpu_note(found) if enough else "",
        "panels": panels(found) if enough else [],
    }
