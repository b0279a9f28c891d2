"""A soak's trends, judged with statistics: per series a Theil-Sen slope with its 95 % interval, the growth per
hour, the time until a limit at that slope, and a verdict.

Samples a few seconds apart are not independent (a Go heap rises and falls with each collection, an etcd database
with each compaction), and Sen's interval assumes they are: on raw samples it comes out too narrow and a steady
series would be judged to grow far more often than 1 time in 40. So the series is cut into at most MAX_BLOCKS
consecutive blocks of equal size and the slope is fitted to the blocks' medians (each at its median time): over
two hours at 30 s that is 24 blocks of 5 minutes, longer than a collection or a compaction cycle, so the blocks'
medians are close to independent, and a block median is robust to a spike within it.

The verdict (RULE):
- `grows`: the interval lies wholly above zero and the growth per hour exceeds FLOOR_PCT_PER_HOUR of the series'
  level (its median), and FLOOR_ABSOLUTE_PER_HOUR of its unit: a significant but tiny slope is no alarm;
- `falls`: the mirror image;
- `flat`: the interval lies within ± the floor;
- `inconclusive`: anything else (too short or too noisy a soak to say), and fewer than MIN_BLOCKS points.
A series never measured is `not measured`, never 0. On steady series the rule says `grows` at most ALPHA_ONE_SIDED
of the time (the interval's upper tail; the floor only lowers it): tests/unit/test_soak_trends.py measures it on
synthetic series, benchmarks/soak_false_alarm.py on steady soaks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadtests.analysis.formats import in_unit
from loadtests.analysis.stats import theil_sen
from loadtests.results.soak import SoakMeta, SoakSample, has_soak, load_meta, load_samples

CONFIDENCE = 0.95
ALPHA_ONE_SIDED = (1 - CONFIDENCE) / 2  # the stated false-alarm rate of `grows` per steady series
FLOOR_PCT_PER_HOUR = 5.0  # growth below this share of the level per hour is no alarm, however significant
# ...nor growth below this per hour whatever the level, per unit: a CPU share of a few % creeping up by a tenth of a
# point an hour, or a process's memory by less than a MiB an hour, is no finding
FLOOR_ABSOLUTE_PER_HOUR = {"%": 1.0, "bytes": float(2**20)}
MAX_BLOCKS = 24
MIN_BLOCKS = 6
HOUR_S = 3600.0
ETCD_DEFAULT_QUOTA_BYTES = 2 * 2**30  # etcd's quota where --quota-backend-bytes is not set
GROWS, FLAT, FALLS, INCONCLUSIVE, NOT_MEASURED = "grows", "flat", "falls", "inconclusive", "not measured"
RULE = (f"Theil-Sen slope of at most {MAX_BLOCKS} block medians, {CONFIDENCE:.0%} interval; grows: interval above 0 "
        f"and growth > {FLOOR_PCT_PER_HOUR:g} % of the level per hour (and > 1 % of a core or 1 MiB per hour); flat: "
        "interval within ± that floor; falls: the mirror of grows; else inconclusive")
# figure (the part of a series' name after its component) -> the limit it grows toward
MEMORY_FIGURES = frozenset({"rss_bytes", "heap_inuse_bytes", "process_rss_bytes"})
ETCD_SIZE_FIGURES = frozenset({"db_size_bytes", "db_in_use_bytes"})


@dataclass(frozen=True)
class Trend:
    """One series judged: its slope and interval per hour, the growth against its level, and the verdict."""

    series: str
    unit: str
    samples: int
    blocks: int = 0
    level: float | None = None  # the series' median
    last: float | None = None
    slope_per_h: float | None = None
    low_per_h: float | None = None
    high_per_h: float | None = None
    floor_per_h: float = 0.0
    verdict: str = NOT_MEASURED
    limit: float | None = None  # what the series grows toward (the machine's memory, etcd's quota)
    hours_to_limit: float | None = None  # at the slope, from the last value; None: not growing, or no limit
    onset_s: float | None = None  # when a growing series first left its first block's level

    @property
    def growth_pct_per_h(self) -> float | None:
        if self.slope_per_h is None or not self.level:
            return None
        return self.slope_per_h / abs(self.level) * 100


@dataclass
class SoakJudgement:
    """Every series of a soak judged, and those that grew in the order they started to."""

    trends: list[Trend]
    hours_measured: float
    rule: str = RULE
    notes: list[str] = field(default_factory=list)
    settle_s: float = 0.0  # the trends cover the samples from this many seconds into the window

    @property
    def grown(self) -> list[Trend]:
        """The series judged `grows`, the earliest to leave its level first."""
        found = [t for t in self.trends if t.verdict == GROWS]
        return sorted(found, key=lambda t: (math.inf if t.onset_s is None else t.onset_s, t.series))

    @property
    def passed(self) -> bool:
        return not self.grown


def blocks(ts: Sequence[float], ys: Sequence[float], most: int = MAX_BLOCKS) -> tuple[list[float], list[float]]:
    """The series as the medians of at most `most` consecutive blocks of equal size (times and values)."""
    size = max(1, math.ceil(len(ys) / most))
    starts = range(0, len(ys), size)
    return ([float(statistics.median(ts[i:i + size])) for i in starts],
            [float(statistics.median(ys[i:i + size])) for i in starts])


def verdict(low: float, high: float, slope: float, floor: float) -> str:
    """The RULE, on a slope and its interval per hour against the practical floor per hour."""
    if low > 0 and slope > floor:
        return GROWS
    if high < 0 and -slope > floor:
        return FALLS
    if low >= -floor and high <= floor:
        return FLAT
    return INCONCLUSIVE


def trend(series: str, unit: str, ts: Sequence[float], ys: Sequence[float | None], limit: float | None = None,
          floor_pct: float = FLOOR_PCT_PER_HOUR) -> Trend:
    """One series' slope, interval and verdict; samples it did not measure are left out, not counted as 0."""
    pairs = [(t, y) for t, y in zip(ts, ys, strict=True) if y is not None and math.isfinite(y)]
    if not pairs:
        return Trend(series, unit, 0)
    times, values = [p[0] for p in pairs], [p[1] for p in pairs]
    bt, by = blocks(times, values)
    level, last = float(statistics.median(values)), values[-1]
    if len(bt) < MIN_BLOCKS or bt[-1] <= bt[0]:
        return Trend(series, unit, len(values), len(bt), level, last, verdict=INCONCLUSIVE, limit=limit)
    slope, intercept, low, high = (v * HOUR_S for v in theil_sen(bt, by, CONFIDENCE))
    widen = ar1_widening(values, len(bt))
    if math.isinf(widen):  # too few independent values among the samples to say
        return Trend(series, unit, len(values), len(bt), level, last, slope, verdict=INCONCLUSIVE, limit=limit)
    low, high = slope - (slope - low) * widen, slope + (high - slope) * widen
    floor = max(floor_pct / 100 * abs(level), FLOOR_ABSOLUTE_PER_HOUR.get(unit, 0.0))
    found = verdict(low, high, slope, floor)
    to_limit = (limit - last) / slope if limit is not None and slope > 0 and limit > last else None
    return Trend(series, unit, len(values), len(bt), level, last, slope, low, high, floor, found, limit, to_limit,
                 onset(bt, by, slope / HOUR_S, intercept / HOUR_S) if found == GROWS else None)


MAX_LAG1 = 0.95  # a lag-1 correlation above this is taken as this (the widening would grow without bound)


def lag1(ys: Sequence[float]) -> float:
    """The series' lag-1 autocorrelation as an AR(1) reading, from its first differences (a trend only shifts their
    mean, so it cannot pass for correlation, nor hide it as a residual about a fitted line does): for AR(1) with
    coefficient r the differences' lag-1 autocorrelation is -(1 - r) / 2, hence r = 1 + 2 rho; within [0, MAX_LAG1]."""
    diffs = [b - a for a, b in zip(ys, ys[1:], strict=False)]
    if len(diffs) < 3:
        return 0.0
    mean = statistics.fmean(diffs)
    centred = [d - mean for d in diffs]
    total = sum(c * c for c in centred)
    if total <= 0:
        return 0.0
    rho = sum(a * b for a, b in zip(centred, centred[1:], strict=False)) / total
    return min(MAX_LAG1, max(0.0, 1 + 2 * rho))


def ar1_widening(ys: Sequence[float], blocks: int) -> float:
    """How much wider the blocks' interval must be where the samples are correlated beyond what the blocks absorb
    (a short soak's blocks are shorter than the series' own cycles): the samples carry n_eff = n (1 - r) / (1 + r)
    independent values (r = lag1), and where that is fewer than the blocks, the interval widens by
    sqrt(blocks / n_eff); infinite (no interval) where n_eff is below MIN_BLOCKS."""
    r = lag1(ys)
    effective = len(ys) * (1 - r) / (1 + r)
    return math.inf if effective < MIN_BLOCKS else math.sqrt(max(1.0, blocks / effective))


def onset(ts: Sequence[float], ys: Sequence[float], slope: float, intercept: float) -> float | None:
    """The first block time at which the series stands above its first block by three times the blocks' scatter
    about the fitted line (a robust sigma: 1.4826 × the median absolute residual); None when it never does."""
    residuals = [y - (intercept + slope * t) for t, y in zip(ts, ys, strict=True)]
    sigma = 1.4826 * statistics.median(abs(r) for r in residuals)
    start = ys[0]
    return next((t for t, y in zip(ts, ys, strict=True) if y > start + 3 * sigma and y > start), None)


def limit_of(series: str, meta: SoakMeta) -> float | None:
    """What a series grows toward: the machine's memory for a process's memory, etcd's quota for its database."""
    figure = series.rsplit(".", 1)[-1]
    if figure in MEMORY_FIGURES:
        return meta.memory_limit_bytes
    if figure in ETCD_SIZE_FIGURES:
        return meta.etcd_quota_bytes or ETCD_DEFAULT_QUOTA_BYTES
    return None


def judge(samples: Sequence[SoakSample], meta: SoakMeta, floor_pct: float = FLOOR_PCT_PER_HOUR) -> SoakJudgement:
    """Every series the soak recorded (and every series it named but never measured), judged by the RULE on the
    samples after the settling time (meta.settle_s): the first minutes are shown, not judged."""
    names = list(dict.fromkeys([*meta.units, *(name for s in samples for name in s.values)]))
    judged = [s for s in samples if s.t_s >= meta.settle_s]
    ts = [s.t_s for s in judged]
    trends = [trend(name, meta.units.get(name, ""), ts, [s.values.get(name) for s in judged],
                    limit_of(name, meta), floor_pct) for name in names]
    hours = (samples[-1].t_s - samples[0].t_s) / HOUR_S if len(samples) > 1 else 0.0
    return SoakJudgement(trends, round(hours, 4), notes=list(meta.notes), settle_s=meta.settle_s)


def downsample(ts: Sequence[float], ys: Sequence[float | None], most: int) -> tuple[list[float], list[float | None]]:
    """At most `most` points for a page: the mean of each run of consecutive samples (None where none of a run was
    measured); the raw samples stay in the run folder."""
    if len(ts) <= most:
        return list(ts), list(ys)
    size = math.ceil(len(ts) / most)
    out_t: list[float] = []
    out_y: list[float | None] = []
    for i in range(0, len(ts), size):
        measured = [y for y in ys[i:i + size] if y is not None]
        out_t.append(float(statistics.fmean(ts[i:i + size])))
        out_y.append(float(statistics.fmean(measured)) if measured else None)
    return out_t, out_y


def by_component(trends: Sequence[Trend]) -> Mapping[str, list[Trend]]:
    """Trends grouped by the component their series belongs to (the part of the name before the first dot)."""
    grouped: dict[str, list[Trend]] = {}
    for found in trends:
        grouped.setdefault(found.series.split(".", 1)[0], []).append(found)
    return grouped


def judge_folder(run_dir: Path) -> SoakJudgement | None:
    """The soak in a run folder judged from what is on disk now (None: the folder holds no soak)."""
    if not has_soak(run_dir):
        return None
    return judge(load_samples(run_dir), load_meta(run_dir))


def amount(value: float | None, unit: str) -> str:
    """A value in the style of every page (formats.in_unit: sizes in KiB/MiB/GiB, latencies in ms or s, % of a
    core); a count with four significant digits, so a slope of a few keys an hour still shows."""
    if unit in ("bytes", "s", "%"):
        return in_unit(value, unit)
    return "—" if value is None else f"{value:,.4g}"


def trend_text(t: Trend) -> str:
    """One line: the series, its verdict, growth per hour with its interval, the time to its limit."""
    if t.slope_per_h is None or t.low_per_h is None or t.high_per_h is None:
        return f"{t.series}: {t.verdict} ({t.samples} samples)"
    pct = t.growth_pct_per_h
    line = (f"{t.series}: {t.verdict}: {amount(t.slope_per_h, t.unit)}/h "
            f"[{amount(t.low_per_h, t.unit)}, {amount(t.high_per_h, t.unit)}]"
            + (f" ({pct:+.1f} % of its level {amount(t.level, t.unit)} per hour)" if pct is not None else ""))
    if t.hours_to_limit is not None:
        line += f"; {t.hours_to_limit:,.1f} h to {amount(t.limit, t.unit)} at this slope"
    return line


FASTER, SLOWER, SAME = "B grows faster", "B grows slower", "same"
Z_95 = 1.959964  # the normal quantile of a two-sided 95 % interval


@dataclass(frozen=True)
class SlopeDifference:
    """One series in two soaks (A, then B): B's slope less A's per hour, its 95 % interval, and the verdict."""

    series: str
    unit: str
    a: Trend
    b: Trend
    difference_per_h: float | None = None
    low_per_h: float | None = None
    high_per_h: float | None = None
    floor_per_h: float = 0.0
    verdict: str = NOT_MEASURED  # "B grows faster", "B grows slower", "same", or inconclusive / not measured


def _standard_error(t: Trend) -> float | None:
    """A slope's standard error per hour, from its (widened) 95 % interval's width."""
    if t.low_per_h is None or t.high_per_h is None:
        return None
    return (t.high_per_h - t.low_per_h) / (2 * Z_95)


def slope_difference(a: Trend, b: Trend, floor_pct: float = FLOOR_PCT_PER_HOUR) -> SlopeDifference:
    """Whether B's slope differs from A's: the difference of the two Theil-Sen slopes with a 95 % interval from
    their standard errors (each read off its interval, normal approximation, the soaks independent); it differs
    when that interval excludes 0 and the difference exceeds the practical floor of the larger level, is the
    same when the interval lies within ± that floor."""
    se_a, se_b = _standard_error(a), _standard_error(b)
    if a.slope_per_h is None or b.slope_per_h is None or se_a is None or se_b is None:
        either = NOT_MEASURED if NOT_MEASURED in (a.verdict, b.verdict) else INCONCLUSIVE
        return SlopeDifference(a.series, a.unit or b.unit, a, b, verdict=either)
    difference = b.slope_per_h - a.slope_per_h
    half = Z_95 * math.hypot(se_a, se_b)
    floor = floor_pct / 100 * max(abs(a.level or 0.0), abs(b.level or 0.0))
    found = verdict(difference - half, difference + half, difference, floor)
    named = {GROWS: FASTER, FALLS: SLOWER, FLAT: SAME}.get(found, INCONCLUSIVE)
    return SlopeDifference(a.series, a.unit or b.unit, a, b, difference, difference - half, difference + half, floor,
                           named)


def compare_soaks(a: SoakJudgement, b: SoakJudgement) -> list[SlopeDifference]:
    """Every series both soaks recorded, B's slope against A's."""
    by_name = {t.series: t for t in b.trends}
    return [slope_difference(t, by_name[t.series]) for t in a.trends if t.series in by_name]


def difference_text(d: SlopeDifference) -> str:
    if d.difference_per_h is None or d.low_per_h is None or d.high_per_h is None:
        return f"{d.series}: {d.verdict}"
    return (f"{d.series}: {d.verdict}: B - A {amount(d.difference_per_h, d.unit)}/h "
            f"[{amount(d.low_per_h, d.unit)}, {amount(d.high_per_h, d.unit)}] (A {d.a.verdict}, B {d.b.verdict})")
