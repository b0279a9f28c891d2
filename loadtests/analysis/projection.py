"""Projections of this run's measured growth to larger scales: a fitted curve per figure, with a band that
says how little a few steps can tell, or the reason a figure cannot be projected from them.

A run measures a few steps; readers want to know what happens at the scale they plan for. Each growing figure
(memory, etcd size and keys, objects in storage, server-side and pod-startup p99, watch delay, CPU) is fitted
against nodes with two candidate models:

- linear, y = a + b·x (costs per node: objects, bytes);
- power law, y = a·x^b, fitted in log-log space (super- or sub-linear growth), only when every x and y is > 0.

The one whose values fit the measured points better, in the figure's own units, gives the projected value. The
95 % band around it is the widest of three, so that each way three steps can mislead widens it:

- the chosen model's prediction interval (Student t from its residuals): noise in the steps;
- the prediction interval of both models averaged, each weighted by its likelihood on the steps (the residual
  sum of squares that chose the model, RSS^(−n/2)): a choice the steps barely make is not taken as certain;
- the leave-one-out error: each step left out in turn, the others refitted (with both models while two points
  cannot choose between them), its relative miss per doubling of nodes between the left-out step and the
  nearest kept one (a miss across less than a doubling counts as across one); the n misses are samples of how far
  the fit misses a step it has not seen, so the band takes the 95 % prediction bound of the next one (Student t
  with n−1 degrees of freedom times √(1 + 1/n) times their root mean square), times the doublings from the
  measured steps to the projected scale. Collinear steps have no residuals, but a model that the remaining steps
  fit as well predicts the left-out one differently, so their band is not falsely narrow.

A figure is not projected, and says why, when it was measured at fewer than 3 scales, when a time or CPU figure
was fitted over steps where this machine's CPU was saturated (its growth is the machine's), or when its
leave-one-out error exceeds LOO_LIMIT_PER_DOUBLING. Figures with an SLO threshold also get the scale at which
the fitted curve crosses it.

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

from loadtests.analysis import formats, stats
from loadtests.analysis.figures import CHARTS, Chart, Series, series
from loadtests.analysis.slo import thresholds
from loadtests.config.plan import default_project_to
from loadtests.results import RunResult, StepResult

MIN_POINTS = 3  # two points always fit a line exactly: no residual, no band, no honest choice of model
CONFIDENCE = 0.95  # of every band
CROSSING_LIMIT_NODES = 1_000_000  # a crossing further out than this is reported as none
CPU_BOUND_SHARE = 0.85  # machine CPU at or above this share of all its cores: the machine sets the pace
# A fit that misses its own left-out steps by more than half their value per doubling of nodes has not found
# the figure's trend: its band's leave-one-out part alone would run from zero to twice the projected value within
# two doublings, a band that says nothing while looking like a number. Such a figure abstains instead.
LOO_LIMIT_PER_DOUBLING = 0.50
NOT_PROJECTABLE = "not projectable from these steps"
BISECTIONS = 52  # halvings of the bracket when finding a quantile of the averaged models: down to rounding
OTHER_MODEL_SHOWN = 0.05  # the other model's weight from which the table names it: below, it hardly moves the band
CURVE_POINTS = 60

# Figures that measure time or CPU: on a saturated machine their growth is the machine's, not the control plane's.
CPU_SENSITIVE = frozenset({"server_mutating", "server_read_resource", "server_read_namespace", "server_read_cluster",
                           "pod_startup", "watch_delay", "cpu"})


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """Two-sided Student-t quantile (0.975 for a 95 % band) with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"a prediction interval needs at least one degree of freedom (got {df})")
    return stats.t_quantile(0.5 + confidence / 2, df)


def _log(x: np.ndarray) -> np.ndarray:
    """Natural log, -inf at and below 0 (no warning: a power law puts nothing there)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), -np.inf)


@dataclass(frozen=True)
class Model:
    """One fitted model of y against nodes, with what its prediction interval needs.

    linear: y = a + b·x; power: y = a·x^b, fitted as log y = log a + b·log x. `s`, `x_mean` and `sxx` are in
    the space the model was fitted in (log space for the power law), so its band is computed there too.
    """

    model: str  # "linear" | "power"
    a: float
    b: float
    r2: float  # of the predictions against the measured values, in the figure's own units
    rss: float  # residual sum of squares, in the figure's own units (what chose the model)
    n: int
    s: float  # residual standard error in fitting space (0 with two points: they fit exactly)
    x_mean: float
    sxx: float

    def predict(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self.model == "power":
            return self.a * np.power(x, self.b)
        return self.a + self.b * x

    def spread(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """Centre and scale, in fitting space, of a new measurement at x (Student t with n − 2 degrees)."""
        x = np.asarray(x, dtype=float)
        u = _log(x) if self.model == "power" else x
        intercept = math.log(self.a) if self.model == "power" else self.a
        with np.errstate(invalid="ignore"):
            scale = self.s * np.sqrt(1 + 1 / self.n + (u - self.x_mean) ** 2 / self.sxx)
        return intercept + self.b * u, scale

    def model_interval(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """This model's own 95 % prediction interval at x: where a new measurement would fall if this model,
        and only it, were right."""
        centre, scale = self.spread(x)
        half = t_quantile(self.n - 2) * scale
        if self.model == "power":
            return np.exp(centre - half), np.exp(centre + half)
        return centre - half, centre + half

    def cdf(self, q: Any, x: Any) -> np.ndarray:
        """Probability, under this model alone, that a new measurement at x is at most q."""
        return self._cdf_at(q, *self.spread(x))

    def _cdf_at(self, q: Any, centre: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """`cdf` with the spread at x already computed (the band's bisection asks at the same x many times)."""
        q = np.asarray(q, dtype=float)
        v = _log(q) if self.model == "power" else q
        exact = ~(scale > 0)  # no residual: all the probability sits on the curve
        if self.n <= 2:
            return (v >= centre).astype(float)
        with np.errstate(invalid="ignore"):
            # Student t's distribution function as a plain ufunc, cheap to call many times
            spread_out = stats.t_cdf(self.n - 2, (v - centre) / np.where(exact, 1.0, scale))
        return np.where(exact, (v >= centre).astype(float), spread_out)

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
        return f"linear: {'+' if self.b >= 0 else ''}{formats.in_unit(self.b * 1000, unit)} per 1,000 nodes"


@dataclass(frozen=True)
class LeftOut:
    """One step left out of the fit: what the other steps predicted for it, and how far from them it was."""

    nodes: float
    measured: float
    predicted: float  # the worst of the candidates' predictions when two points could not choose
    error: float  # |predicted − measured| / |measured| (over the figure's largest value where the measured is 0)
    distance: float  # |ln nodes − ln nodes of the nearest kept step|; 0 for a repeat of a kept scale

    @property
    def per_doubling(self) -> float:
        """The relative error per doubling of nodes it was predicted across. A miss across less than a doubling
        counts as made across one: steps that close differ by their noise more than by their trend, and dividing
        noise by a short distance would make it look like a steep trend."""
        return self.error / max(1.0, self.distance / math.log(2))


@dataclass(frozen=True)
class Fit(Model):
    """The chosen model, with the candidates it was chosen from and its leave-one-out misses: what an honest
    band at a larger scale needs. `interval` is that band; `model_interval` the chosen model's own."""

    candidates: tuple[Model, ...] = ()
    weights: tuple[float, ...] = ()  # of the candidates, in the same order, summing to 1
    left_out: tuple[LeftOut, ...] = ()
    x_min: float = 0.0
    x_max: float = 0.0

    @property
    def weight(self) -> float:
        """The chosen model's share of the averaged prediction."""
        return next((w for m, w in zip(self.candidates, self.weights, strict=True) if m.model == self.model), 1.0)

    @property
    def worst(self) -> LeftOut | None:
        """The left-out step missed by the most per doubling of nodes."""
        return max(self.left_out, key=lambda m: m.per_doubling, default=None)

    @property
    def loo_per_doubling(self) -> float:
        """The worst leave-one-out relative error per doubling of nodes (0 without left-out steps)."""
        worst = self.worst
        return worst.per_doubling if worst is not None else 0.0

    def beyond(self, x: Any) -> np.ndarray:
        """How far x lies outside the fitted steps, in doublings of nodes (0 inside them)."""
        lx = _log(np.asarray(x, dtype=float))
        low, high = (math.log(v) if v > 0 else -math.inf for v in (self.x_min, self.x_max))
        with np.errstate(invalid="ignore"):
            distance = np.maximum(0.0, np.maximum(lx - high, low - lx)) / math.log(2)
        return np.nan_to_num(distance, nan=0.0)

    @property
    def loo_error_bound(self) -> float:
        """The 95 % prediction bound of the next error per doubling, from the n leave-one-out errors seen: they
        are n samples of how far this fit misses a step it did not see, so a new step may miss by up to
        t(n−1)·√(1 + 1/n) times their root mean square (the largest of three is no bound on the fourth)."""
        errors = [m.per_doubling for m in self.left_out]
        if len(errors) < 2:
            return self.loo_per_doubling
        rms = math.sqrt(sum(e * e for e in errors) / len(errors))
        t = stats.t_quantile((1 + CONFIDENCE) / 2, len(errors) - 1)
        return max(self.loo_per_doubling, t * math.sqrt(1 + 1 / len(errors)) * rms)

    def loo_half_width(self, x: Any) -> np.ndarray:
        """The least half-width of the band at x: the bound of the next leave-one-out error per doubling, times
        the doublings from the fitted steps to x (0 inside them, where the prediction intervals speak)."""
        return np.abs(self.predict(x)) * self.loo_error_bound * self.beyond(x)

    def averaged_interval(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """The 95 % interval of the candidates' predictions averaged by their weights (a mixture of their
        Student t distributions): it spans both models where the steps cannot tell them apart."""
        x = np.asarray(x, dtype=float)
        bounds = [m.model_interval(x) for m in self.candidates]
        start_low = np.minimum.reduce([b[0] for b in bounds])
        start_high = np.maximum.reduce([b[1] for b in bounds])

        spreads = [(m, w, *m.spread(x)) for m, w in zip(self.candidates, self.weights, strict=True)]

        def cdf(q: np.ndarray) -> np.ndarray:
            return sum(w * m._cdf_at(q, centre, scale) for m, w, centre, scale in spreads)

        levels = np.array([(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])[:, None]  # both ends in one search
        low = np.broadcast_to(start_low, (2, *start_low.shape)).astype(float)  # every model's own interval is inside
        high = np.broadcast_to(start_high, (2, *start_high.shape)).astype(float)
        for _ in range(BISECTIONS):
            middle = (low + high) / 2
            below = cdf(middle) < levels
            low, high = np.where(below, middle, low), np.where(below, high, middle)
        return low[0], high[1]  # rounded outwards

    def interval(self, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """95 % band at x: the widest of the chosen model's prediction interval, the models' averaged interval,
        and the leave-one-out error grown to x's distance beyond the fitted steps."""
        x = np.asarray(x, dtype=float)
        low, high = self.model_interval(x)
        if len(self.candidates) > 1:
            averaged_low, averaged_high = self.averaged_interval(x)
            low, high = np.minimum(low, averaged_low), np.maximum(high, averaged_high)
        centre, half = self.predict(x), self.loo_half_width(x)
        return np.minimum(low, centre - half), np.maximum(high, centre + half)

    def not_projectable(self, unit: str) -> str:
        """Why the steps cannot carry a projection of this fit (its leave-one-out error), or "" if they can."""
        worst = self.worst
        if worst is None or self.loo_per_doubling <= LOO_LIMIT_PER_DOUBLING:
            return ""
        return (f"leave-one-out error {share(self.loo_per_doubling)} per doubling of nodes, beyond the "
                f"{share(LOO_LIMIT_PER_DOUBLING)} bound: fitted without the {worst.nodes:,.0f}-node step, the other "
                f"steps predict {signed(worst.predicted, unit)} there, {signed(worst.measured, unit)} was measured")


def share(fraction: float) -> str:
    """A fraction as a whole percentage, as the reports write them: `12 %`."""
    return f"{fraction * 100:,.0f} %"


def signed(value: float, unit: str) -> str:
    """A figure in its unit, with a minus sign where a fit went below zero (the units' formats assume ≥ 0)."""
    return f"−{formats.in_unit(-value, unit)}" if value < 0 else formats.in_unit(value, unit)


def _fit_linear(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, float]:
    """Least squares a + b·x: (a, b, residual standard error, mean x, Sxx); the error is 0 for two points."""
    x_mean = float(x.mean())
    sxx = float(((x - x_mean) ** 2).sum())
    b = float(((x - x_mean) * (y - y.mean())).sum() / sxx)
    if abs(b) * (x.max() - x.min()) <= 1e-12 * max(1e-300, float(np.abs(y).max())):
        b = 0.0  # rounding noise of a flat series, not growth
    a = float(y.mean() - b * x_mean)
    residuals = y - (a + b * x)
    s = math.sqrt(float((residuals ** 2).sum()) / (len(x) - 2)) if len(x) > 2 else 0.0
    return a, b, s, x_mean, sxx


def _quality(y: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(R², residual sum of squares) in the figure's own units, the same measure for either model."""
    rss = float(((y - predicted) ** 2).sum())
    sst = float(((y - y.mean()) ** 2).sum())
    if sst == 0:
        return (1.0 if rss <= _exact(y) else 0.0), rss
    return 1 - rss / sst, rss


def _exact(y: np.ndarray) -> float:
    """A residual sum of squares at or below this is rounding: the model goes through every point."""
    return 1e-12 * max(1.0, float((y ** 2).sum()))


def _candidates(xs: np.ndarray, ys: np.ndarray) -> list[Model]:
    """The linear fit, and the power law where every value is positive."""
    n = len(xs)
    a, b, s, x_mean, sxx = _fit_linear(xs, ys)
    linear = Model("linear", a, b, 0.0, 0.0, n, s, x_mean, sxx)
    r2, rss = _quality(ys, linear.predict(xs))
    found = [Model("linear", a, b, r2, rss, n, s, x_mean, sxx)]
    if (xs > 0).all() and (ys > 0).all():
        la, lb, ls, lx_mean, lsxx = _fit_linear(np.log(xs), np.log(ys))
        power = Model("power", math.exp(la), lb, 0.0, 0.0, n, ls, lx_mean, lsxx)
        p_r2, p_rss = _quality(ys, power.predict(xs))
        found.append(Model("power", power.a, lb, p_r2, p_rss, n, ls, lx_mean, lsxx))
    return found


def _choose(models: list[Model]) -> Model:
    """The candidate with the smaller residual sum of squares; the simpler linear model wins ties (y = b·x is
    both)."""
    linear = models[0]
    power = next((m for m in models if m.model == "power"), None)
    return power if power is not None and power.rss < linear.rss * (1 - 1e-9) else linear


def _weights(models: list[Model], y: np.ndarray) -> tuple[float, ...]:
    """Each candidate's likelihood on the steps, normalised: RSS^(−n/2) for models of equal size (Gaussian
    errors, in the figure's units, the measure that chose). Fits through every point weigh the same."""
    floor = _exact(y)
    logs = np.array([-len(y) / 2 * math.log(max(m.rss, floor)) for m in models])
    shares = np.exp(logs - logs.max())
    return tuple(float(w) for w in shares / shares.sum())


def _relative(predicted: float, measured: float, scale: float) -> float:
    """The miss relative to the measured value; relative to `scale` (the figure's largest value) where the measured
    value is 0 and has no size of its own to compare with."""
    size = abs(measured) or scale
    return abs(predicted - measured) / size if size else 0.0


def _leave_one_out(xs: np.ndarray, ys: np.ndarray) -> tuple[LeftOut, ...]:
    """Each step left out: the other steps fitted the way `fit` fits all of them, their prediction for it.

    With two steps left both models go through them exactly, so nothing chooses between them: the miss is the
    worse of the two predictions."""
    found = []
    scale = float(np.abs(ys).max())
    for i in range(len(xs)):
        keep = np.arange(len(xs)) != i
        rest_x, rest_y = xs[keep], ys[keep]
        distinct = len(np.unique(rest_x))
        if distinct < 2:
            continue
        models = _candidates(rest_x, rest_y)
        if distinct >= MIN_POINTS:
            models = [_choose(models)]
        predicted = max((float(m.predict([xs[i]])[0]) for m in models), key=lambda p: abs(p - ys[i]))
        positive = xs[i] > 0 and (rest_x > 0).all()
        distance = float(np.abs(np.log(rest_x) - math.log(xs[i])).min()) if positive else 0.0
        measured = float(ys[i])
        found.append(LeftOut(float(xs[i]), measured, predicted, _relative(predicted, measured, scale), distance))
    return tuple(found)


def fit(x: Sequence[float], y: Sequence[float]) -> Fit | None:
    """The better of a linear and a power-law fit of y against x, with what its band needs (the other candidate,
    the leave-one-out misses); None with fewer than 3 distinct x. `Fit.not_projectable` says whether its
    leave-one-out error allows a projection at all."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) != len(ys) or len(np.unique(xs)) < MIN_POINTS:
        return None
    models = _candidates(xs, ys)
    best = _choose(models)
    return Fit(best.model, best.a, best.b, best.r2, best.rss, best.n, best.s, best.x_mean, best.sxx,
               candidates=tuple(models), weights=_weights(models, ys), left_out=_leave_one_out(xs, ys),
               x_min=float(xs.min()), x_max=float(xs.max()))


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
    low: list[float]  # the 95 % band (Fit.interval), floored at 0 (every projected figure is non-negative)
    high: list[float]
    threshold: float | None = None  # the SLO the figure is judged against, if any
    crossing: float | None = None  # nodes at which the fitted curve reaches the threshold
    cpu_bound: bool = False  # kept for readers of the table: a projection is never fitted over CPU-bound steps

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
class Abstention:
    """A figure that the measured steps cannot project, and why (made from the steps' own data)."""

    series: Series
    chart: Chart
    x: list[int]
    y: list[float]
    kind: str  # "points" (too few scales) | "cpu" (fitted over CPU-bound steps) | "loo" (leave-one-out error)
    reason: str
    fit: Fit | None = None
    threshold: float | None = None
    cpu_bound: bool = False

    @property
    def label(self) -> str:
        return f"{self.chart.short} {self.series.name}"

    @property
    def text(self) -> str:
        return f"{NOT_PROJECTABLE}: {self.reason}"


@dataclass
class RunProjection:
    """Every figure of a run, projected or abstaining with its reason; or the reason nothing was tried."""

    targets: list[int]
    measured_nodes: list[int]
    figures: list[Projection | Abstention] = field(default_factory=list)  # in the order of figures.series
    reason: str = ""  # why nothing was projected
    flat: list[str] = field(default_factory=list)  # figures with the same value at every measured step
    cpu_bound_nodes: list[int] = field(default_factory=list)  # measured steps where the machine was saturated
    cpu_known: bool = False  # machine CPU recorded for at least one measured step
    cpus: int | None = None

    @property
    def projections(self) -> list[Projection]:
        return [f for f in self.figures if isinstance(f, Projection)]

    @property
    def abstained(self) -> list[Abstention]:
        return [f for f in self.figures if isinstance(f, Abstention)]

    def table(self) -> pd.DataFrame:
        """One row per figure: model, fit quality, points used, the leave-one-out error per doubling and the
        chosen model's weight, value and band at each target (empty where it abstains, with the reason), the SLO
        threshold and the scale at which the fit crosses it, the CPU-bound flag."""
        records = []
        for f in self.figures:
            model = f.fit
            row: dict[str, Any] = {
                "figure": f.label, "chart": f.chart.id, "unit": f.chart.unit,
                "model": model.model if model else None, "a": model.a if model else None,
                "b": model.b if model else None, "r2": model.r2 if model else None, "points": len(f.x),
                "nodes_used": ", ".join(f"{n:,}" for n in f.x),
                "loo_per_doubling": model.loo_per_doubling if model else None,
                "weight": model.weight if model else None,
                "not_projectable": f.reason if isinstance(f, Abstention) else "",
            }
            if isinstance(f, Projection):
                for target, value, low, high in zip(f.targets, f.values, f.low, f.high, strict=True):
                    row[f"at_{target}"], row[f"low_{target}"], row[f"high_{target}"] = value, low, high
                row.update(crossing_nodes=f.crossing)
            row.update(threshold=f.threshold, cpu_bound=f.cpu_bound)
            records.append(row)
        columns = ["figure", "chart", "unit", "model", "a", "b", "r2", "points", "nodes_used", "loo_per_doubling",
                   "weight", *(f"{k}_{t}" for t in self.targets for k in ("at", "low", "high")),
                   "threshold", "crossing_nodes", "cpu_bound", "not_projectable"]
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
    cpus = cpus or step.health.summary.cpus
    return int(cpus) if isinstance(cpus, int | float) and cpus > 0 else None


def cpu_bound(run: RunResult, step: StepResult) -> bool | None:
    """Was the machine's CPU near its capacity through the step (average ≥ 85 % of all cores)? None: unknown."""
    average = step.health.summary.cpu_machine_avg
    cpus = machine_cpus(run, step)
    if not isinstance(average, int | float) or cpus is None:
        return None
    return average >= CPU_BOUND_SHARE * 100.0 * cpus


def capacity_words(cpus: int | None) -> str:
    share = f"{CPU_BOUND_SHARE * 100:.0f} %"
    return f"{share} of its {cpus} cores" if cpus else f"{share} of its cores"


def node_list(nodes: Sequence[float]) -> str:
    return ", ".join(f"{n:,.0f}" for n in nodes)


def project(run: RunResult, to: list[int] | None = None) -> RunProjection:
    """Fit every growing figure over the run's measured steps and project it to `to` (default: the plan's
    targets), or say why it cannot be."""
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
        if s.slo_line or not s.projected:  # which figures grow with scale is declared with them (figures.py)
            continue
        points = [(step.nodes, float(s.values[i])) for i, step in measured if s.values[i] is not None]
        x, y = [p[0] for p in points], [p[1] for p in points]
        chart = CHARTS[s.chart]
        threshold = float(limits[s.slo_key]) if s.slo_key else None
        model = fit(x, y)
        busy = sorted({n for n in x if bound.get(n)}) if s.chart in CPU_SENSITIVE else []
        common = {"series": s, "chart": chart, "x": x, "y": y, "threshold": threshold, "cpu_bound": bool(busy)}
        if model is None:
            found.figures.append(Abstention(
                **common, kind="points",
                reason=f"measured at {len(set(x))} of the {scales_measured} measured scales; a fit needs "
                       f"{MIN_POINTS} at different scales"))
            continue
        if len(set(y)) == 1:  # nothing grew: its projection is the value itself
            found.flat.append(f"{chart.short} {s.name}")
            continue
        if busy:
            found.figures.append(Abstention(
                **common, kind="cpu", fit=model,
                reason=f"fitted over CPU-bound steps ({node_list(busy)} nodes: machine CPU at or above "
                       f"{capacity_words(found.cpus)}), so its growth is this machine's limit, not the control "
                       "plane's"))
            continue
        if why := model.not_projectable(chart.unit):
            found.figures.append(Abstention(**common, kind="loo", reason=why, fit=model))
            continue
        low, high = model.interval(scales) if scales else (np.array([]), np.array([]))
        found.figures.append(Projection(
            series=s, chart=chart, x=x, y=y, fit=model, targets=scales,
            values=model.predict(scales).tolist() if scales else [],
            low=np.maximum(low, 0.0).tolist(), high=high.tolist(), threshold=threshold,
            crossing=model.crossing(threshold) if threshold is not None else None))
    if not found.figures:
        found.reason = ("Every figure was the same at every measured step, so nothing is projected." if found.flat
                        else f"No figure had values at {MIN_POINTS} or more measured steps, so nothing is projected.")
    return found


# ---- the report's view --------------------------------------------------------------------------------------


def cpu_note(found: RunProjection) -> str:
    """Which figures are CPU-bound on this machine, in one sentence a reader can act on."""
    if not found.cpu_known:
        return ("Machine CPU was not recorded for these steps, so whether the latency and CPU growth reflect this "
                "machine's limit rather than the control plane's is unknown.")
    capacity = capacity_words(found.cpus)
    if not found.cpu_bound_nodes:
        return f"No measured step was CPU-bound: the machine's CPU stayed below {capacity} at every step."
    flagged = [f.label for f in found.figures if f.cpu_bound]
    steps = node_list(found.cpu_bound_nodes)
    if not flagged:
        return f"The machine was CPU-bound (at or above {capacity}) at {steps} nodes; no projected figure is affected."
    return (f"CPU-bound on this machine (average CPU at or above {capacity} at {steps} nodes): "
            f"{', '.join(flagged)}. Their growth says more about this machine than about the control plane, so they "
            "are not projected.")
