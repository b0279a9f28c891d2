"""The page of a lesson: what the field report said, what each variant measured here, the effect and a verdict.

Each of the lesson's figures is read from the last measured step of every run (growth lessons: from every
step) in one of three ways the lesson declares:

- figure: a path into the step's results, e.g. `etcd.wal_fsync_p99_s`, `pod_startup.p99`,
  `etcd.keys_by_prefix.events`, `processes[component=kube-apiserver].cpu_percent` (summed over matches),
  `requests_by_code[5*]` (keys matching a pattern, summed), `etcd.alarms` (a list: its length);
- scrape: a metric of the /metrics pages kept at the window's start and end ({page: apiserver | etcd,
  metric, labels (a value or a list of values), stat: delta | rate | p50 | p90 | p99 | sum | sum_rate | end |
  total (a counter at the window's close: since its process started, e.g. an apiserver restarted in the window),
  present: a metric with a series of the read's labels wherever they can be counted, e.g. a priority level's
  apiserver_flowcontrol_nominal_limit_seats: without one, not measured; with one, a counter missing from the
  page counted nothing});
- audit: requests of the step's audit log ({verb, resource, client (a prefix), code (a prefix),
  stat: count | rate | p99 (latency, receipt to response)}).

The effect is the ratio of the warned setup's median to the fix's (inverted for `expect: lower`), so above 1
means the direction the field report describes; a growth lesson's is the last step's value over the first's.
A verdict rests only on measured noise, so it needs at least MIN_RUNS runs of every variant (one run shows the
effect and says "single run": no verdict); it is read from the deciding figure (the lesson's first that is
not a `check`: a sanity check that is zero by construction in one variant cannot go either way):

- reproduced: every run of one setup lies beyond every run of the other in the direction the report describes,
  or a Mann-Whitney test (stats.mann_whitney_u) finds them different at ALPHA where the runs allow it;
- not reproduced: they separate the other way, or they overlap within a range (the pooled runs' largest over
  smallest value) that an effect of the size the report implies (`min_effect`) would have cleared;
- inconclusive: they overlap over a range too wide to tell, or a histogram bound hides the values;
- incomplete: a variant aborted, recorded nothing or never ran: no verdict rests on it.

A growth lesson judges the shape (the quadratic term of value = a + b·n + c·n² over every run: linear per node
when its 95 % interval holds 0) and the magnitude (the per-node slope against the report's figure over its
nodes) apart."""

from __future__ import annotations

import fnmatch
import functools
import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadtests import results
from loadtests.analysis import formats, stats
from loadtests.analysis.metrics import Snapshot, counter_delta, histogram_delta
from loadtests.analysis.samples import repeat_folders
from loadtests.analysis.scrapes import load_scrape, scrape_path, step_folder
from loadtests.config.lesson import Lesson, Measure, Variant
from loadtests.errors import UnreadableFile, unreadable
from loadtests.results import RunResult, StepResult

LESSON_RESULTS = "lesson.json"


VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")


QUANTILES = ("p50", "p90", "p99")


# a value, and "<" or ">" where it is only a histogram's bound (its rank in the first or the open last bucket)
Reading = tuple[float | None, str]


def _sum(values: list[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return sum(numbers) if numbers else None


def _walk(value: Any, tokens: list[str]) -> list[Any]:
    """Every value the path reaches: `name[key=value]` selects list items, `name[pattern]` dict keys."""
    if not tokens:
        return [value]
    token, rest = tokens[0], tokens[1:]
    selector = None
    if token.endswith("]") and "[" in token:
        token, selector = token[:-1].split("[", 1)
    found = value.get(token) if isinstance(value, dict) else getattr(value, token, None)
    if found is None:
        return []
    if selector is None:
        return _walk(found, rest)
    if isinstance(found, dict):
        matched = [v for key, item in found.items() if fnmatch.fnmatchcase(str(key), selector)
                   for v in _walk(item, rest)]
        # a recorded mapping without the key counts none of it (no 5xx answered: 0), an empty one is unknown
        return matched or ([0.0] if found and not rest else [])
    if isinstance(found, list):
        key, _, wanted = selector.partition("=")
        return [v for item in found if [str(k) for k in _walk(item, [key])] == [wanted] for v in _walk(item, rest)]
    return []


def figure_value(step: StepResult, path: str) -> float | None:
    """A figure of the step's results by path; a list at the end counts its items."""
    reached = _walk(step, path.split("."))
    if len(reached) == 1 and isinstance(reached[0], list):
        return float(len(reached[0]))
    return _sum(reached)


def figure_reading(step: StepResult, path: str) -> Reading:
    """figure_value, and the bound the results recorded beside it (a quantile of one histogram: a server
    latency's `p99`, etcd's `wal_fsync_p99_s`, a health summary's p99 maximum) in its holder's `bounds`."""
    *parent, last = path.split(".")
    holders = _walk(step, parent) if parent else []
    bound = _walk(holders[0], ["bounds", last]) if len(holders) == 1 else []
    return figure_value(step, path), str(bound[0]) if bound else ""


def _one_of(values: list[Any]) -> Any:
    allowed = frozenset(str(v) for v in values)
    return lambda value: value in allowed


def _matcher(labels: dict[str, Any]) -> dict[str, Any]:
    """Label matchers: a value, or a list of values any of which matches."""
    return {k: _one_of(want) if isinstance(want, list) else str(want) for k, want in (labels or {}).items()}


@functools.lru_cache(maxsize=64)
def _parsed_page(folder: Path, source: str, which: str, families: frozenset[str], _stamp: int) -> Snapshot | None:
    return load_scrape(folder, source, which, families=families)


def kept_page(folder: Path, source: str, which: str, families: frozenset[str]) -> Snapshot | None:
    """The named families of a step's kept page, parsed once while it is unchanged: a lesson's measures read the
    same few pages of several megabytes, each page from every variant's evaluation and the table's."""
    try:
        stamp = scrape_path(folder, source, which).stat().st_mtime_ns
    except OSError:
        return None
    return _parsed_page(folder, source, which, families, stamp)


def scrape_reading(step: StepResult, folder: Path, spec: dict[str, Any]) -> Reading:
    """A metric over the step's window, from the /metrics pages kept with it."""
    source, metric, stat = spec.get("page", "apiserver"), spec["metric"], spec.get("stat", "delta")
    families = frozenset({metric, *([str(spec["present"])] if spec.get("present") else [])})
    end = kept_page(folder, source, "end", families)
    if end is None:
        return None, ""
    match = _matcher(spec.get("labels") or {})
    window = step.duration_s or None
    if stat == "end":
        return end.total(metric, **match), ""
    if stat == "total":  # a counter's count at the close: all since its process started (a restarted apiserver's)
        value = end.total(metric, **match)
        return (0.0 if value is None and end.has(metric) else value), ""
    start = kept_page(folder, source, "start", families)  # only figures over the window read the window's first page
    if stat in ("delta", "rate"):
        present = spec.get("present")  # a metric with a series of these labels wherever they can be counted
        if present and not end.series(str(present), **match):
            return None, ""  # what would count them (a priority level) does not exist here: not measured
        if not end.has(metric):  # not on the page: not measured (this version may not export it, or nothing counted)
            # unless `present` says they can be counted: a counter appears with its first increment, so none was
            return (0.0 if present else None), ""
        # the family is on the page: a labelled counter appears with its first increment, so no series of these
        # labels means none of them happened
        delta = counter_delta(start, end, metric, **match) or 0.0
        return (delta / window if stat == "rate" and window else delta), ""
    if stat in ("sum", "sum_rate"):
        delta = counter_delta(start, end, f"{metric}_sum", **match)
        return (None if delta is None else delta / window if stat == "sum_rate" and window else delta), ""
    if stat in QUANTILES:
        histogram = histogram_delta(start, end, metric, **match)
        if histogram is None or not histogram.count:
            return None, ""
        quantile = histogram.bounded_quantile(int(stat[1:]) / 100)
        return quantile.honest, quantile.bound or ""
    raise ValueError(f"unknown scrape stat {stat!r}")


def audit_value(step: StepResult, spec: dict[str, Any]) -> float | None:
    """Requests of the step's audit log matching verb, resource, client and code prefixes; or (stat p99) their
    latency from receipt to response, every code and flow-control queueing included. Each row's p99 is exact (the
    log's own timestamps); of several rows the slowest row's p99 is given, so a p99 read names verb, resource
    and client to match one row (none matched: not measured)."""
    if not step.audit.source:
        return None
    count = 0
    p99s = []
    for row in step.audit.requests:
        if spec.get("verb") and row.verb != spec["verb"]:
            continue
        if spec.get("resource") and row.resource != spec["resource"]:
            continue
        if spec.get("client") and not row.client.startswith(spec["client"]):
            continue
        if row.p99_s is not None:
            p99s.append(row.p99_s)
        code = spec.get("code")
        count += sum(n for c, n in row.codes.items() if c.startswith(str(code))) if code else row.count
    if spec.get("stat", "count") == "rate":
        return count / step.duration_s if step.duration_s else None
    if spec.get("stat") == "p99":
        return max(p99s) if p99s else None
    return float(count)


def reading(measure: Measure, step: StepResult, folder: Path) -> Reading:
    """The measure at one step (folder: the step's files, where its /metrics pages are kept), and its bound."""
    kind, spec = next(iter(measure.read.items()))
    try:
        if kind == "figure":
            return figure_reading(step, str(spec))
        if kind == "scrape":
            return scrape_reading(step, folder, spec)
        return audit_value(step, spec), ""
    except (OSError, ValueError, KeyError):
        return None, ""


def read(measure: Measure, step: StepResult, folder: Path) -> float | None:
    return reading(measure, step, folder)[0]


@dataclass
class VariantRuns:
    """A variant's runs (one, or its repeats): the complete ones, which the figures come from, and those that
    were aborted, recorded nothing or never ran, which no verdict rests on."""

    variant: Variant
    folder: Path
    runs: list[tuple[RunResult, Path]] = field(default_factory=list)  # complete runs
    aborted: list[tuple[RunResult, Path]] = field(default_factory=list)  # runs that did not complete
    missing: list[str] = field(default_factory=list)  # run folders that recorded nothing
    never_ran: bool = False  # no folder at all: the lesson stopped before this variant

    @staticmethod
    def load(variant: Variant, folder: Path) -> VariantRuns:
        found = VariantRuns(variant, folder)
        if not folder.is_dir():
            found.never_ran = True
            return found
        for run_folder in repeat_folders(folder) or [folder]:
            try:
                run = results.load(run_folder)
            except (OSError, ValueError):
                found.missing.append(str(run_folder))
                continue
            (found.runs if run.status == "complete" else found.aborted).append((run, run_folder))
        return found

    @property
    def state(self) -> str:
        """"complete", or why no verdict may rest on this variant: "never ran", "aborted", "recorded nothing"."""
        if self.never_ran:
            return "never ran"
        if self.aborted:
            return "aborted"
        if self.missing or not self.runs:
            return "recorded nothing"
        return "complete"

    def measured_steps(self) -> list[tuple[list[StepResult], Path]]:
        return [([s for s in run.steps if s.status == "measured"], path) for run, path in self.runs]

    def last_readings(self, measure: Measure) -> list[tuple[float, str]]:
        """The measure at the last measured step of every complete run (runs where it was not measured left out)."""
        found = []
        for steps, path in self.measured_steps():
            if steps:
                value, bound = reading(measure, steps[-1], step_folder(path, steps[-1].index))
                if value is not None and math.isfinite(value):
                    found.append((value, bound))
        return found

    def per_step(self, measure: Measure) -> list[tuple[int, list[float]]]:
        """(nodes, the value of every complete run) at every measured step."""
        by_nodes: dict[int, list[float]] = {}
        for steps, path in self.measured_steps():
            for step in steps:
                value = read(measure, step, step_folder(path, step.index))
                if value is not None and math.isfinite(value):
                    by_nodes.setdefault(step.nodes, []).append(value)
        return sorted(by_nodes.items())


# Runs a side needs before a verdict: with fewer, the run-to-run noise is not measured (lesson.DEFAULT_REPEAT).
MIN_RUNS = stats.MIN_SAMPLES


ALPHA = 0.05  # the rank test's level, where the repeats are enough for it to reach it


SINGLE_RUN = "single run"


TOO_FEW_RUNS = "too few runs"


CHECK_HOLDS, CHECK_FAILS = "check holds", "check fails"


UNJUDGED = (SINGLE_RUN, TOO_FEW_RUNS, "not measured")


def ratio(warned: float, fix: float) -> float:
    """warned / fix, with a zero side made explicit: ∞ when only the fix is zero, 1 when both are."""
    if fix == 0:
        return 1.0 if warned == 0 else math.inf
    if warned == 0:
        return 0.0
    return warned / fix


def times(effect: float | None, prefix: str = "") -> str:
    """An effect as a factor: ×2.41, ×∞ (only the fix measured zero), — (not measured); `prefix` "≥ " or "≤ "
    where a histogram bound says only how large it is at least or at most (see effect_prefix)."""
    if effect is None:
        return "—"
    return "×∞" if math.isinf(effect) else f"{prefix}×{effect:.2f}"


def effect_prefix(bounded: str) -> str:
    """How a bias (see bias) qualifies the effect shown: at least it ("≥ "), at most it ("≤ "), or neither."""
    return {"understated": "≥ ", "overstated": "≤ "}.get(bounded, "")


def bias(measure: Measure, warned_bound: str, fix_bound: str) -> str:
    """Which way histogram bounds can move the oriented effect: a "<" value may be smaller than shown, a ">"
    one larger; "overstated", "understated", "unknown" (both ways), or "" (no bound)."""
    over_side, under_side = (fix_bound, warned_bound) if measure.expect == "lower" else (warned_bound, fix_bound)
    over = over_side == "<" or under_side == ">"
    under = over_side == ">" or under_side == "<"
    return "unknown" if over and under else "overstated" if over else "understated" if under else ""


@dataclass(frozen=True)
class Evidence:
    """What the repeats of two sides say, oriented so that "up" is the direction the field report describes."""

    effect: float  # oriented ratio of the medians
    runs: int  # the smaller side's number of runs
    up: bool  # every run of the side expected higher lies above every run of the other
    down: bool  # every run of it lies below: the opposite, fully separated
    p: float | None  # two-sided Mann-Whitney p, where the runs allow it to reach ALPHA
    range_ratio: float  # the pooled runs' largest value over their smallest: how far noise alone reached


def evidence(measure: Measure, warned: list[float], fix: list[float]) -> Evidence:
    high, low = (fix, warned) if measure.expect == "lower" else (warned, fix)
    pooled = [*warned, *fix]
    smallest = min(pooled)
    p = (stats.mann_whitney_u(high, low).p
         if stats.min_p_value(len(high), len(low)) < ALPHA else None)
    return Evidence(effect=_oriented(measure, statistics.median(warned), statistics.median(fix)),
                    runs=min(len(warned), len(fix)), up=min(high) > max(low), down=max(high) < min(low), p=p,
                    range_ratio=max(pooled) / smallest if smallest > 0 else math.inf)


def judge(measure: Measure, found: Evidence, bounded: str = "") -> tuple[str, str]:
    """The verdict on repeated runs, and why: reproduced when the runs of the two setups separate the way the
    report describes (every run beyond every other, or a rank test at ALPHA), not reproduced when they separate
    the other way or overlap within a range an effect of the report's size would have cleared; `bounded` (see
    bias) keeps a verdict from resting on a histogram bound that may hide the real values."""
    shown = times(found.effect, effect_prefix(bounded))
    tested = f", U test {stats.p_text(found.p)}" if found.p is not None else ""
    if bounded == "unknown":
        return "inconclusive", f"{shown}, but both values are only histogram bounds: its buckets cannot tell them apart"
    significant = found.p is not None and found.p < ALPHA
    if found.up or (significant and found.effect > 1):
        if bounded == "overstated":
            return "inconclusive", f"{shown}, but a histogram bound may overstate it: the real effect may be smaller"
        how = "every run of one setup beyond every run of the other" if found.up else "the runs differ"
        return "reproduced", f"{shown}: {how} (n={found.runs} a side{tested})"
    if found.down or (significant and found.effect < 1):
        if bounded == "understated":
            return "inconclusive", f"{shown}, but a histogram bound may understate it: the real effect may be larger"
        return "not reproduced", f"the opposite: {shown}, the runs separate against the expected direction " \
                                 f"(n={found.runs} a side{tested})"
    if bounded:
        return "inconclusive", f"{shown}: the runs overlap, and one side is only a histogram bound"
    reach = "×∞" if math.isinf(found.range_ratio) else f"×{found.range_ratio:.2f}"
    if measure.min_effect > found.range_ratio:
        return "not reproduced", (f"{shown}: the runs overlap, all within {reach} of each other, where an effect of "
                                  f"×{measure.min_effect:g} would have separated them (n={found.runs} a side{tested})")
    return "inconclusive", (f"{shown}: the runs overlap and spread over {reach}, too wide to tell a "
                            f"×{measure.min_effect:g} effect (n={found.runs} a side{tested})")


@dataclass
class Comparison:
    """One measure, the warned setup against one fix (or a growth's last step against its first)."""

    measure: str
    against: str  # the fix variant, or "first step"
    warned: list[float]
    fix: list[float]
    effect: float | None
    noise: float | None  # the repeats' largest spread (relative), None where it was not measured
    noise_from: str
    verdict: str
    reason: str
    unit: str
    warned_bound: str = ""  # "<" or ">" where every warned value is only a histogram bound
    fix_bound: str = ""
    p_value: float | None = None
    check: bool = False  # a sanity check, shown and never a verdict
    effect_prefix: str = ""  # "≥ " or "≤ " where a histogram bound says only a least or a most effect


def side_bound(readings: list[tuple[float, str]]) -> str:
    """The bound every reading of one side shares, else "" (a median of bounds is a bound too)."""
    found = {bound for _, bound in readings}
    return found.pop() if len(found) == 1 else ""


def _oriented(measure: Measure, warned: float, fix: float) -> float:
    return ratio(fix, warned) if measure.expect == "lower" else ratio(warned, fix)


def compare(measure: Measure, warned: list[float], fix: list[float], against: str, warned_bound: str = "",
            fix_bound: str = "", why_missing: str = "") -> Comparison:
    """The effect of one measure and its verdict, from the runs of both sides: none from fewer than MIN_RUNS
    a side (the noise is then not measured), none from a sanity check (it says only whether it holds)."""
    if not warned or not fix:
        side = "either side" if not warned and not fix else "the warned side" if not warned else against
        return Comparison(measure.name, against, warned, fix, None, None, "not measured", "not measured",
                          why_missing or f"no value on {side}", measure.unit, check=measure.check)
    effect = _oriented(measure, statistics.median(warned), statistics.median(fix))
    runs = min(len(warned), len(fix))
    if runs < 2:
        noise, noise_from = None, "not measured (single run)"
    else:
        noise = max(stats.summarize(warned).spread_pct, stats.summarize(fix).spread_pct) / 100
        noise_from = f"repeats (n={runs} a side)"
    bounded = bias(measure, warned_bound, fix_bound)
    if measure.check:
        if measure.expect == "same":  # the same load on both sides: their runs' ranges meet
            holds = min(warned) <= max(fix) and min(fix) <= max(warned) and not bounded
            said = "the runs of both setups overlap" if holds else "the runs of the two setups do not overlap"
        else:
            holds = evidence(measure, warned, fix).up and not bounded
            said = "every run as the setup implies" if holds else "not every run as the setup implies"
        verdict, reason = (CHECK_HOLDS if holds else CHECK_FAILS,
                           f"{times(effect, effect_prefix(bounded))}: a sanity check of the setup, not a verdict "
                           f"({said})")
        return Comparison(measure.name, against, warned, fix, effect, noise, noise_from, verdict, reason,
                          measure.unit, warned_bound, fix_bound, check=True, effect_prefix=effect_prefix(bounded))
    if runs < MIN_RUNS:
        verdict = SINGLE_RUN if runs == 1 else TOO_FEW_RUNS
        runs_text = "single run" if runs == 1 else f"{runs} runs a side"
        reason = (f"{times(effect, effect_prefix(bounded))}; {runs_text}: noise not measured, "
                  f"no verdict (run each variant {MIN_RUNS} or more times: --repeat {MIN_RUNS})")
        return Comparison(measure.name, against, warned, fix, effect, noise, noise_from, verdict, reason,
                          measure.unit, warned_bound, fix_bound, effect_prefix=effect_prefix(bounded))
    found = evidence(measure, warned, fix)
    verdict, reason = judge(measure, found, bounded)
    return Comparison(measure.name, against, warned, fix, effect, noise, noise_from, verdict, reason, measure.unit,
                      warned_bound, fix_bound, p_value=found.p, effect_prefix=effect_prefix(bounded))


@dataclass
class Growth:
    """A measure across the steps of a sweep: its shape (a power of nodes), per node, set against the field
    report's figure, and projected to the report's scale."""

    measure: str
    unit: str
    points: list[tuple[int, float]]  # (nodes, median over the runs)
    per_node: float | None  # slope of a least-squares line over every run's value, in the measure's unit per node
    projected: float | None = None  # at the field report's scale, from the projection fit
    band: tuple[float, float] | None = None
    fit: str = ""  # the model fitted, or why the steps cannot carry a projection
    per_node_ci: tuple[float, float] | None = None  # 95 % interval of the slope (from the runs' scatter)
    curvature: float | None = None  # the quadratic term of value = a + b·n + c·n², per node²
    curvature_ci: tuple[float, float] | None = None
    shape: str = ""  # "linear per node" | "sub-linear" | "super-linear" | single run / too few runs
    claim_per_node: float | None = None  # the field report's figure over its nodes
    magnitude: str = ""  # the measured per-node figure against the report's, in words


def _slope_interval(xs: list[float], ys: list[float]) -> tuple[float, tuple[float, float] | None]:
    """Least-squares slope and its 95 % interval (t with n-2 degrees of freedom); no interval from 2 points."""
    from scipy import stats as scipy_stats

    fitted = scipy_stats.linregress(xs, ys)
    if len(xs) < 3:
        return float(fitted.slope), None
    t = float(scipy_stats.t.ppf(0.975, len(xs) - 2))
    return float(fitted.slope), (float(fitted.slope - t * fitted.stderr), float(fitted.slope + t * fitted.stderr))


def growth_shape(points: list[tuple[int, list[float]]]) -> tuple[float | None, tuple[float, float] | None, str]:
    """Whether the value grows by a fixed amount per node: the quadratic term c of value = a + b·n + c·n²
    fitted over every run's value, its 95 % interval, and the shape that shows (linear per node when the interval
    holds 0). A shape needs MIN_RUNS runs at every step, so that the scatter about the fit is the runs' noise."""
    from scipy import stats as scipy_stats

    xs = np.array([float(n) for n, values in points for _ in values])
    ys = np.array([v for _, values in points for v in values])
    runs = min((len(values) for _, values in points), default=0)
    if len(points) < 3:
        return None, None, "not measured (fewer than 3 steps with a value)"
    if runs < MIN_RUNS:
        what = "single run" if runs == 1 else f"{runs} runs a step"
        return None, None, f"{what}: noise not measured, no verdict on the shape"
    scale = float(xs.max())  # nodes in units of the largest step keeps the normal equations well conditioned
    design = np.column_stack([np.ones_like(xs), xs / scale, (xs / scale) ** 2])
    coef, _, _, _ = np.linalg.lstsq(design, ys, rcond=None)
    dof = len(xs) - 3
    residual = float(((ys - design @ coef) ** 2).sum()) / dof
    spread = float(np.sqrt(residual * np.linalg.inv(design.T @ design)[2, 2]))
    t = float(scipy_stats.t.ppf(0.975, dof))
    curvature = float(coef[2]) / scale**2
    low, high = (float(coef[2]) - t * spread) / scale**2, (float(coef[2]) + t * spread) / scale**2
    shape = "linear per node" if low <= 0 <= high else "super-linear" if low > 0 else "sub-linear"
    return curvature, (low, high), shape


def growth(measure: Measure, runs: VariantRuns, claim: dict[str, Any]) -> tuple[Growth, Comparison]:
    """The sweep's growth of one measure; its comparison is the last step's runs against the first step's."""
    from loadtests.analysis.projection import NOT_PROJECTABLE, fit

    per_step = runs.per_step(measure)
    points = [(nodes, statistics.median(values)) for nodes, values in per_step]
    found = Growth(measure.name, measure.unit, points, None)
    xs = [float(n) for n, values in per_step for _ in values]
    ys = [v for _, values in per_step for v in values]
    if len({*xs}) >= 2:
        found.per_node, found.per_node_ci = _slope_interval(xs, ys)
        if min(len(v) for _, v in per_step) < MIN_RUNS:
            found.per_node_ci = None  # the scatter of one run a step is misfit, not noise
    found.curvature, found.curvature_ci, found.shape = growth_shape(per_step)
    at_nodes = int(claim.get("nodes") or 0) or None
    if claim.get("measure") == measure.name and at_nodes and claim.get("value"):
        found.claim_per_node = float(claim["value"]) / at_nodes
        found.magnitude = magnitude(found)
    fitted = fit([p[0] for p in points], [p[1] for p in points]) if len(points) >= 3 else None
    why = fitted.not_projectable(measure.unit) if fitted is not None else ""
    if why:
        found.fit = f"{NOT_PROJECTABLE}: {why}"  # the page's fit column says why no projection is given
    elif fitted is not None and at_nodes:
        found.projected = float(fitted.predict([at_nodes])[0])
        low, high = fitted.interval([at_nodes])
        found.band = (max(0.0, float(low[0])), float(high[0]))  # every measure here is a size, time or count
        found.fit = fitted.describe(measure.unit)
    first = per_step[0][1] if per_step else []
    last = per_step[-1][1] if len(per_step) > 1 else []
    against = f"first step ({per_step[0][0]:,} nodes)" if per_step else "first step"
    return found, compare(measure, last, first, against)


def magnitude(found: Growth) -> str:
    """The measured per-node figure against the field report's: a ratio, and where the slope's interval is
    known whether the report's figure lies inside it."""
    if found.per_node is None or not found.claim_per_node:
        return "not measured"
    share = found.per_node / found.claim_per_node
    said = f"{formats.in_unit(found.per_node, found.unit)} per node against the report's " \
           f"{formats.in_unit(found.claim_per_node, found.unit)} (×{share:.2g})"
    if found.per_node_ci is None:
        return f"{said}; single run: no interval"
    low, high = found.per_node_ci
    where = ("within" if low <= found.claim_per_node <= high else "above" if found.claim_per_node > high else "below")
    return f"{said}; the report's figure is {where} the measured 95 % interval " \
           f"({formats.in_unit(low, found.unit)} – {formats.in_unit(high, found.unit)} per node)"


FEATURE_METRIC = "kubernetes_feature_enabled"  # 1 per gate the apiserver reports as on, 0 as off


def _feature_states(runs: VariantRuns, features: list[str]) -> dict[str, str]:
    """Each feature gate's state in the variant's first run, from its kept apiserver page."""
    states: dict[str, str] = {}
    for steps, path in runs.measured_steps()[:1]:
        if not steps:
            continue
        end = kept_page(step_folder(path, steps[-1].index), "apiserver", "end", frozenset({FEATURE_METRIC}))
        for feature in features:
            value = end.total(FEATURE_METRIC, name=feature) if end is not None else None
            states[feature] = "not listed" if value is None else "enabled" if value else "disabled"
    return states


def _recorded(runs: VariantRuns) -> list[str]:
    """What the variant's runs recorded beyond the figures: errors, alarms, refused writes, notes."""
    lines = ["never ran: the lesson stopped before this variant"] if runs.never_ran else []
    for run, path in [*runs.runs, *runs.aborted]:
        name = path.name if path != runs.folder else runs.variant.name
        if run.status != "complete":
            lines.append(f"{name}: run {run.status}" + (f": {run.error}" if run.error else ""))
        for step in run.steps:
            where = f"{name}, step {step.name}"
            if step.status == "saturated":
                lines.append(f"{where}: saturated: {step.saturation.get('condition')}: "
                             f"{step.saturation.get('evidence')}")
            if step.etcd.alarms:
                lines.append(f"{where}: etcd alarm raised: {', '.join(step.etcd.alarms)}")
            codes = {c: n for c, n in step.requests_by_code.items() if c.startswith("5") or c == "429"}
            if codes:
                answered = ", ".join(f"{n:,} × {c}" for c, n in sorted(codes.items()))
                lines.append(f"{where}: apiserver answered {answered}")
            lines.extend(f"{where}: {note}" for note in step.notes)
    lines.extend(f"{m}: recorded no results" for m in runs.missing)
    return lines


INCOMPLETE = "incomplete"


def lesson_verdict(lesson: Lesson, comparisons: list[Comparison], variants: list[VariantRuns]) -> tuple[str, str]:
    """The lesson's verdict and its headline: the deciding measure's, over every fix (all must agree to call it
    reproduced); none while a variant aborted or never ran, and none from single runs."""
    unfinished = [f"{v.variant.name} {v.state}" for v in variants if v.state != "complete"]
    if unfinished:
        return INCOMPLETE, f"no verdict: {', '.join(unfinished)}"
    deciding = [c for c in comparisons if c.measure == lesson.deciding.name]
    found = {c.verdict for c in deciding}
    headline = "; ".join(f"{c.measure} " + (f"({c.against} to last)" if lesson.growth else f"(warned / {c.against})")
                         + f": {c.reason}" for c in deciding)  # each reason starts with the effect
    if not found or found == {"not measured"}:
        return "not measured", headline
    if found & {SINGLE_RUN, TOO_FEW_RUNS}:
        return (SINGLE_RUN if SINGLE_RUN in found else TOO_FEW_RUNS), headline
    if found == {"reproduced"}:
        return "reproduced", headline
    if "not reproduced" in found and "reproduced" not in found and "inconclusive" not in found:
        return "not reproduced", headline
    return "inconclusive", headline


def evaluate(lesson: Lesson, folder: Path) -> dict[str, Any]:
    """Every variant's runs read, every measure compared; what lesson.html and lesson.json hold."""
    variants = {v.name: VariantRuns.load(v, folder / v.name) for v in lesson.variants}
    comparisons: list[Comparison] = []
    growths: list[Growth] = []
    charted: list[tuple[Any, ...]] = []  # what the page draws: ("growth", i, Growth) | ("bars", i, Measure, values)
    if lesson.growth:
        sweep = next(iter(variants.values()))
        for i, measure in enumerate(lesson.measures):
            found, comparison = growth(measure, sweep, lesson.field_report.figure)
            growths.append(found)
            comparisons.append(comparison)
            if found.points:
                charted.append(("growth", i, found))
    else:
        warned = next(r for r in variants.values() if r.variant.role == "warned")
        for i, measure in enumerate(lesson.measures):
            readings = {name: runs.last_readings(measure) for name, runs in variants.items()}
            values = {name: [value for value, _ in found] for name, found in readings.items()}
            bounds = {name: side_bound(found) for name, found in readings.items()}
            ours = warned.variant.name
            for runs in variants.values():
                if runs.variant.role == "fix":
                    fix = runs.variant.name
                    missing = [f"{r.variant.name} {r.state}" for r in (warned, runs) if r.state != "complete"]
                    comparisons.append(compare(measure, values[ours], values[fix], fix, bounds[ours], bounds[fix],
                                               why_missing="; ".join(missing)))
            if any(values.values()):
                charted.append(("bars", i, measure, values))
    verdict, headline = lesson_verdict(lesson, comparisons, list(variants.values()))
    first_run = next((run for runs in variants.values() for run, _ in [*runs.runs, *runs.aborted]), None)
    return {
        "lesson": lesson,
        "verdict": verdict,
        "headline": headline,
        "comparisons": comparisons,
        "growths": growths,
        "variants": [{"variant": runs.variant, "runs": runs.runs, "aborted": runs.aborted, "missing": runs.missing,
                      "state": runs.state, "recorded": _recorded(runs),
                      "features": _feature_states(runs, lesson.features),
                      "reports": [str((path / "report.html").relative_to(folder))
                                  for _, path in [*runs.runs, *runs.aborted] if (path / "report.html").is_file()]}
                     for runs in variants.values()],
        "kube_version": (first_run.environment.get("versions", {}).get("kube-apiserver")
                         or (first_run.plan.get("target") or {}).get("kube_version")) if first_run else "—",
        "scale": " → ".join(f"{s.nodes:,}" for s in first_run.steps) + " nodes" if first_run else "—",
        "charted": charted,
        "against_report": against_report(lesson, comparisons),
    }


def against_report(lesson: Lesson, comparisons: list[Comparison]) -> str:
    """The field report's own pair of figures and their ratio, beside the effect measured here on the same
    figure against each fix (a comparison lesson whose claim quotes both setups' figures); "" otherwise."""
    claim = lesson.field_report
    ratio_said = claim.ratio
    if ratio_said is None:
        return ""
    measure = str(claim.figure.get("measure") or lesson.deciding.name)
    unit = next((m.unit for m in lesson.measures if m.name == measure), "")
    said = (f"{formats.in_unit(float(claim.figure['warned']), unit)} against "
            f"{formats.in_unit(float(claim.figure['fix']), unit)} in the report, ×{ratio_said:.2f}")
    here = [f"against {c.against} {times(c.effect, c.effect_prefix)}"
            + (f" ({c.verdict})" if c.verdict in UNJUDGED else "") for c in comparisons if c.measure == measure]
    return f"{said}; here ({measure}): " + ("; ".join(here) if here else "not measured")


def summary(evaluated: dict[str, Any]) -> dict[str, Any]:
    """lesson.json: the verdict and every comparison, for tables and scripts."""
    lesson: Lesson = evaluated["lesson"]
    return {
        "lesson": lesson.name, "title": lesson.title, "verdict": evaluated["verdict"],
        "headline": evaluated["headline"], "deciding": lesson.deciding.name,
        "variants": {v["variant"].name: {"state": v["state"], "runs": len(v["runs"]), "aborted": len(v["aborted"]),
                                         "recorded_nothing": len(v["missing"])} for v in evaluated["variants"]},
        "kube_version": evaluated["kube_version"], "scale": evaluated["scale"],
        "comparisons": [{**asdict(c), "effect": None if c.effect is None or math.isinf(c.effect) else c.effect,
                         "effect_infinite": c.effect is not None and math.isinf(c.effect)}
                        for c in evaluated["comparisons"]],
        "growths": [asdict(g) for g in evaluated["growths"]],
        "recorded": {v["variant"].name: v["recorded"] for v in evaluated["variants"]},
        "against_report": evaluated["against_report"],
    }


def lesson_record(folder: Path) -> dict[str, Any]:
    """A lesson folder's lesson.json, as written by write_lesson_report; what is not one is refused in one line
    naming the file (exit 2)."""
    path = folder / LESSON_RESULTS
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise unreadable(path, "lesson record", error, "rebuild it: loadtest lesson ... --out on that folder, "
                         "or remove the folder") from None
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), list) or "verdict" not in data:
        raise UnreadableFile(f"{path}: not a readable lesson record (no verdict and comparisons)")
    return data
