"""A history of runs of one plan: every compared figure across the runs in order, and where it changed.

Pairwise `loadtest compare` catches a step between two builds; a slow drift over many CI runs slips past each
pairwise gate. A history lines the runs up by start time and, for every figure `compare` weighs (the same
figures, `samples.readings`, and the same rules, `rules.py`), finds its change points with Apache Otava's
E-divisive means (the Hunter variant by Fleming et al.: sliding windows, then a Student's t-test that merges away
the weak points). Each change point is then judged by the judge (judge.py), as compare's two runs are: its
segments stand for the sides, worse past the rule's margin is a regression, a significant change within it is a
change, lower is better.

Choices, each also said on the page:
- A point is one build: a run folder, a report page, or a folder of repeats, whose repeats' median is one point,
  so a change point always falls between builds and never inside one.
- Otava searches the values as recorded (a histogram bound as its bucket's edge). The verdict weighs the bounds
  at their worst, as compare does: the after segment's mean of the lowest values its points allow ("<" down to 0)
  against the before segment's mean of the highest (">" up to infinity). A change point between bound values
  ("<" after it, or ">" before it) is therefore never a regression, only "within a histogram bound".
- Parameters: Otava's own defaults for the window (50 runs) and the significance (p < 0.001), and a smallest
  relative change of 5 % (Otava's default is 0): with 10 runs Hunter finds a change in about 2 % of series of
  pure noise (benchmarks/history_check.py), so a history of ~90 figure series would show a few noise-sized
  "changes" on every page.
  Every default rule's relative margin (latency 25 %, memory 20 %, CPU 30 %) is far above 5 %; counts (5xx, 429)
  change from 0 by 100 %.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loadtests.analysis import figures, stats
from loadtests.analysis.formats import in_unit
from loadtests.analysis.judge import bound_mark, direction, interval, interval_text, least_change, past_threshold
from loadtests.analysis.rules import limits_from, rule_text
from loadtests.analysis.samples import Reading, Side, load_side, readings
from loadtests.errors import CompareError, SetupError
from loadtests.results import REPORT_SUFFIXES, RunResult

WINDOW_LEN = 50  # Otava's default: runs per window of the split step
MAX_PVALUE = 0.001  # Otava's default: a change point's t-test p-value must be below this
MIN_MAGNITUDE = 0.05  # the smallest relative change reported (see the module's docstring)
MIN_RUNS = 3  # fewer points than this cannot show a change between two segments; use compare
VERB = "make a history"
OTAVA_MISSING = ("change points need Apache Otava, which is not installed: run "
                 ".venv/bin/pip install --no-deps apache-otava==0.8.0 (make venv does)")


def _parse_time(text: str, where: str) -> datetime:
    try:
        found = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise CompareError(f"cannot {VERB}: {where} has no readable start time (started_at {text!r})") from None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


@dataclass
class Point:
    """One build in the history: a run, or the repeats of one build (their median is the point)."""

    name: str  # what the user named: a folder, or a report page (with the run's name inside it)
    runs: list[RunResult]
    path: Path

    @property
    def first(self) -> RunResult:
        return self.runs[0]

    @property
    def title(self) -> str:
        """How the page names the point: its run's id, or for several runs (repeats) the folder they came from."""
        if self.n == 1:
            return self.first.run_id
        where = self.path.parent.name if self.path.suffix.lower() in REPORT_SUFFIXES else self.path.name
        return f"{where or self.first.run_id} ({self.n} repeats)"

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def started(self) -> datetime:
        """The earliest start of its runs."""
        return min(_parse_time(run.started_at, f"run {run.run_id} ({self.name})") for run in self.runs)

    @property
    def date(self) -> str:
        return self.started.astimezone(UTC).strftime("%Y-%m-%d %H:%M")

    @property
    def versions(self) -> dict[str, str]:
        env = self.first.environment if isinstance(self.first.environment, dict) else {}
        found = env.get("versions")
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    @property
    def commit(self) -> str:
        """The commit the run was built from, where its environment recorded one."""
        env = self.first.environment if isinstance(self.first.environment, dict) else {}
        found = env.get("commit") or self.versions.get("commit") or ""
        return str(found)

    @property
    def label(self) -> str:
        """What the x axis says of the point (its date goes below): the Kubernetes version, and the commit where
        the run recorded one."""
        parts = [self.versions.get("kubernetes", "")]
        if self.commit:
            parts.append(self.commit[:10])
        return " · ".join(p for p in parts if p) or self.title

    def side(self) -> Side:
        """The point as a compare side, to read its figures the way compare does."""
        return Side(label=self.name, runs=self.runs, folders=[self.path] * self.n)


@dataclass
class Change:
    """One change point of a figure: the first point of a new segment, the segments' means, and its verdict."""

    position: int  # the point (index into History.points) that starts the new segment
    before: int  # the last point before it that measured the figure
    pvalue: float
    mean_before: float
    mean_after: float
    std_before: float
    std_after: float
    rel_change: float  # mean after / mean before - 1 (Otava's forward_rel_change)
    before_low: float  # the means of the lowest and highest values each segment's points allow (bounds)
    before_high: float
    after_low: float
    after_high: float
    regression: bool = False
    # the latest point starts it, or (a regression) it shows only with the latest point: before it, an outlier
    # just ahead of the latest run hid a step that run confirms, and the next history would find it one run back
    latest: bool = False
    bounded: bool = False  # a point of either segment is only a histogram bound

    @property
    def direction(self) -> str:
        """"up" (worse: every figure is lower-is-better), "down" (better) or "overlap" (bounds allow either; a
        change point between equal segments can only be one of bounds)."""
        way = direction(self.before_low, self.before_high, self.after_low, self.after_high)
        return "overlap" if way == "same" else way

    @property
    def status(self) -> str:
        if self.regression:
            return "regression"
        return {"up": "worse, within margin", "down": "better", "overlap": "within a histogram bound"}[self.direction]

    @property
    def state(self) -> str:
        """A css class: bad (regression), warn (worse within margin), better, or skip (bounds)."""
        if self.regression:
            return "bad"
        return {"up": "warn", "down": "better"}.get(self.direction, "skip")

    @property
    def change_text(self) -> str:
        """"+60 %"; with bounds the least change they allow ("≥ +40 %"), "?" where they allow either way."""
        if not self.bounded:
            return f"{self.rel_change * 100:+.0f} %"
        least = least_change(self.before_low, self.before_high, self.after_low, self.after_high)
        if least is None or self.direction == "overlap":
            return "?"
        return f"{'≥' if self.direction == 'up' else '≤'} {least * 100:+.0f} %"

    @property
    def p_text(self) -> str:
        return stats.p_text(self.pvalue)


@dataclass
class Track:
    """One figure of one step across the history: a value per point that measured it, and its change points."""

    step_index: int
    step_name: str
    nodes: int
    chart: str
    name: str
    rule: str
    positions: list[int]  # the points that measured it, in order
    values: list[float]  # the point's median, a bound counted as its value (what Otava searches)
    lows: list[float]  # the lowest and highest value each point allows (equal where no value is a bound)
    highs: list[float]
    changes: list[Change] = field(default_factory=list)
    analysed: bool = True  # False when measured by too few points

    @property
    def label(self) -> str:
        return f"{figures.CHARTS[self.chart].short} {self.name}"

    @property
    def unit(self) -> str:
        return figures.CHARTS[self.chart].unit

    @property
    def origin(self) -> str:
        return figures.CHARTS[self.chart].source.split(" · ")[0]

    def bound(self, k: int) -> str:
        """"<" (at most), ">" (at least), "–" (between), or "" for the k-th measured point."""
        return bound_mark(self.lows[k], self.highs[k])

    @property
    def bounds(self) -> list[str]:
        return [self.bound(k) for k in range(len(self.positions))]

    @property
    def bounded_positions(self) -> list[int]:
        """The points whose value is only a histogram bound."""
        return [p for p, b in zip(self.positions, self.bounds, strict=True) if b]

    def value_text(self, k: int) -> str:
        """The k-th point's value for people, as a bound where the histogram gives no more."""
        return interval_text(self.values[k], self.lows[k], self.highs[k], self.unit)


@dataclass
class History:
    """The points in start order, a track per compared figure per step, and what was found."""

    points: list[Point]
    tracks: list[Track]
    limits: dict[str, float]
    max_pvalue: float = MAX_PVALUE
    window_len: int = WINDOW_LEN
    min_magnitude: float = MIN_MAGNITUDE
    notes: list[str] = field(default_factory=list)

    @property
    def latest(self) -> Point:
        return self.points[-1]

    @property
    def changes(self) -> list[tuple[Track, Change]]:
        return [(t, c) for t in self.tracks for c in t.changes]

    @property
    def regressions(self) -> list[tuple[Track, Change]]:
        return [(t, c) for t, c in self.changes if c.regression]

    @property
    def latest_regressions(self) -> list[tuple[Track, Change]]:
        """The regressions the latest run starts: what --gate fails on."""
        return [(t, c) for t, c in self.regressions if c.latest]

    @property
    def earlier_regressions(self) -> list[tuple[Track, Change]]:
        return [(t, c) for t, c in self.regressions if not c.latest]

    @property
    def other_changes(self) -> list[tuple[Track, Change]]:
        return [(t, c) for t, c in self.changes if not c.regression]

    @property
    def bounded_tracks(self) -> list[Track]:
        return [t for t in self.tracks if t.bounded_positions]

    @property
    def analysed(self) -> list[Track]:
        return [t for t in self.tracks if t.analysed]

    @property
    def label(self) -> str:
        if self.latest_regressions:
            return "REGRESSION"
        return "CHANGES" if self.changes else "STEADY"

    @property
    def state(self) -> str:
        return {"REGRESSION": "fail", "CHANGES": "skip"}.get(self.label, "pass")

    @property
    def headline(self) -> str:
        """One line for people and CI logs."""
        n, figures_n = len(self.points), len(self.analysed)
        counts = (f"{len(self.changes)} change point(s) in {figures_n} figure series over {n} runs "
                  f"({len(self.regressions)} regression(s), {len(self.other_changes)} change(s))")
        if self.latest_regressions:
            starts = len(self.latest_regressions)
            return f"the latest run ({self.latest.title}) starts {starts} regression(s); {counts}"
        if not self.changes:
            return f"no change point in {figures_n} figure series over {n} runs"
        return f"the latest run starts no regression; {counts}"

    def point_text(self, position: int) -> str:
        """"run <id> (v1.37.2, 2026-01-02 10:00)"."""
        point = self.points[position]
        return f"run {point.title} ({point.label}, {point.date})"

    def describe(self, track: Track, change: Change) -> str:
        """"98.0 ms → 157.0 ms (+60 %, p<0.001) from run B (v1.37.2, ...), after run A (...)", for stdout and JUnit."""
        unit = track.unit
        extras = [change.change_text, change.p_text]
        if change.bounded:
            extras.append("histogram bounds, weighed at their worst")
        return (f"{in_unit(change.mean_before, unit)} → {in_unit(change.mean_after, unit)} ({', '.join(extras)}) "
                f"from {self.point_text(change.position)}, after {self.point_text(change.before)}")

    def rule_text(self, track: Track) -> str:
        return rule_text(track.rule, self.limits)


# ---- loading --------------------------------------------------------------------------------------------------


def load_points(paths: Sequence[Path], force: bool = False) -> tuple[list[Point], list[str]]:
    """The points the user named, in start order, and notes. Each path is a run folder, a folder of repeats, or a
    report page; anything else is refused in one line. Runs of different plans are refused unless `force`."""
    points: list[Point] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw)
        side = load_side(path, str(path), force=True, verb=VERB)  # the plans are checked across every point below
        notes += side.notes
        points.append(Point(name=str(path), runs=side.runs, path=path))
    return order(points, force, notes)


def order(points: list[Point], force: bool = False, notes: list[str] | None = None) -> tuple[list[Point], list[str]]:
    """The points by start time (ties in the order named), refusing too few, duplicates and mixed plans."""
    notes = list(notes or [])
    if len(points) < MIN_RUNS:
        raise CompareError(f"cannot {VERB}: {len(points)} run(s) named; a history needs {MIN_RUNS} or more "
                           "(for two runs use loadtest compare)")
    seen: dict[tuple[str, str], str] = {}  # run ids repeat (every CI job's first repeat is repeat-1): with its start
    for point in points:
        for run in point.runs:
            identity = (run.run_id, run.started_at)
            if identity in seen:
                raise CompareError(f"cannot {VERB}: run {run.run_id} of {run.started_at} is named twice "
                                   f"({seen[identity]} and {point.name})")
            seen[identity] = point.name
    digests: dict[str, list[str]] = {}
    for point in points:
        for run in point.runs:
            digests.setdefault(run.plan_digest, []).append(point.title)
    if len(digests) > 1:
        mix = "; ".join(f"digest {d} ({', '.join(dict.fromkeys(ids))})" for d, ids in digests.items())
        if not force:
            raise CompareError(f"cannot {VERB}: the runs come from different plans ({mix}); pass --force to line "
                               "them up anyway")
        notes.append(f"the runs come from different plans ({mix}); lined up anyway (forced): a change point "
                     "where the plan changed is the plan's")
    ordered = sorted(points, key=lambda p: p.started)  # stable: equal times keep the order named
    for point in ordered:
        incomplete = [run for run in point.runs if run.status != "complete"]
        if incomplete:
            notes.append(f"{point.name}: {len(incomplete)} of {point.n} run(s) did not complete "
                         f"({incomplete[0].status}); only their finished steps are in the history")
    return ordered, notes


# ---- tracks and change points ---------------------------------------------------------------------------------


def _median_interval(found: list[Reading]) -> tuple[float, float, float]:
    """A point's value (the median, a bound counted as its value) and where that median truly lies: "<" is at
    most its value (down to 0), ">" at least (up to infinity), as compare reads a side of several runs."""
    low, high = interval(found)
    return statistics.median([v for v, _ in found]), low, high


def tracks(points: Sequence[Point]) -> tuple[list[Track], list[str]]:
    """A track per compared figure per step, over the points that measured it; notes on mismatched steps."""
    notes: list[str] = []
    steps: dict[int, tuple[str, int]] = {}
    by_key: dict[tuple[int, str, str], Track] = {}
    for position, point in enumerate(points):
        side = point.side()
        for step in side.steps:
            known = steps.setdefault(step.index, (step.name, step.nodes))
            if known[1] != step.nodes:
                notes.append(f"step {step.index} has {known[1]} nodes in earlier runs but {step.nodes} in "
                             f"{point.title} (lined up anyway)")
        found, rules = readings(side)
        for (chart, name), per_step in found.items():
            rule = rules[(chart, name)]
            if rule is None:
                continue
            for index, got in per_step.items():
                if not got:
                    continue
                step_name, nodes = steps[index]
                track = by_key.setdefault((index, chart, name), Track(index, step_name, nodes, chart, name, rule,
                                                                      [], [], [], []))
                value, low, high = _median_interval(got)
                track.positions.append(position)
                track.values.append(value)
                track.lows.append(low)
                track.highs.append(high)
    order_of = {c: i for i, c in enumerate(figures.CHARTS)}
    first_seen = {key: i for i, key in enumerate(by_key)}
    ordered = sorted(by_key.items(), key=lambda kv: (kv[0][0], order_of[kv[0][1]], first_seen[kv[0]]))
    return [t for _, t in ordered], list(dict.fromkeys(notes))


@dataclass(frozen=True)
class RawChange:
    """What Otava says of one change point: where the new segment starts (an index into the series) and its
    t-test statistics."""

    index: int
    pvalue: float
    mean_1: float
    mean_2: float
    std_1: float
    std_2: float
    rel_change: float


def change_points(series: Sequence[float], window_len: int = WINDOW_LEN, max_pvalue: float = MAX_PVALUE,
                  min_magnitude: float = MIN_MAGNITUDE) -> list[RawChange]:
    """Otava's change points of one series (E-divisive means, Hunter's split and merge). A constant series, or
    one shorter than MIN_RUNS, has none."""
    values = [float(v) for v in series]
    if len(values) < MIN_RUNS or max(values) == min(values):
        return []
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        raise SetupError(OTAVA_MISSING) from None
    # a list, not an array: Otava's detector slices its window out of a list only
    found, _ = compute_change_points(values, window_len=window_len, max_pvalue=max_pvalue,
                                     min_magnitude=min_magnitude)
    return [RawChange(int(c.index), float(c.stats.pvalue), float(c.stats.mean_1), float(c.stats.mean_2),
                      float(c.stats.std_1), float(c.stats.std_2), float(c.stats.forward_rel_change()))
            for c in sorted(found, key=lambda c: c.index)]


def _mean(values: Sequence[float]) -> float:
    return math.inf if any(math.isinf(v) for v in values) else statistics.fmean(values)


def without_latest(track: Track) -> Track:
    """The track as the history stood before its latest point."""
    return dataclasses.replace(track, positions=track.positions[:-1], values=track.values[:-1],
                               lows=track.lows[:-1], highs=track.highs[:-1], changes=[])


def judge(track: Track, found: list[RawChange], last: int, limits: dict[str, float]) -> list[Change]:
    """Each change point with its segments' bounds and the judge's verdict (judge.past_threshold, as compare
    judges two sides): worse only when the after segment's lowest mean is past the rule over the before
    segment's highest."""
    cuts = [0, *[c.index for c in found], len(track.values)]
    judged = []
    for k, raw in enumerate(found):
        before, after = slice(cuts[k], cuts[k + 1]), slice(cuts[k + 1], cuts[k + 2])
        bounded = any(track.bound(i) for i in range(cuts[k], cuts[k + 2]))
        change = Change(position=track.positions[raw.index], before=track.positions[raw.index - 1],
                        pvalue=raw.pvalue, mean_before=raw.mean_1, mean_after=raw.mean_2, std_before=raw.std_1,
                        std_after=raw.std_2, rel_change=raw.rel_change,
                        before_low=_mean(track.lows[before]), before_high=_mean(track.highs[before]),
                        after_low=_mean(track.lows[after]), after_high=_mean(track.highs[after]), bounded=bounded)
        change.latest = change.position == last
        change.regression = past_threshold(track.rule, change.before_low, change.before_high, change.after_low,
                                           change.after_high, limits)
        judged.append(change)
    return judged


def history(points: Sequence[Point], thresholds: dict[str, Any] | None = None, max_pvalue: float = MAX_PVALUE,
            window_len: int = WINDOW_LEN, min_magnitude: float = MIN_MAGNITUDE,
            notes: Sequence[str] = ()) -> History:
    """Every compared figure across the points (in the order given: load_points sorts them by start), its change
    points and their verdicts under the regression rules (REGRESSION_DEFAULTS with `thresholds` over them)."""
    limits = limits_from(thresholds)
    if not 0 < max_pvalue < 1:
        raise CompareError(f"history: --max-pvalue must be between 0 and 1, e.g. {MAX_PVALUE:g} (got {max_pvalue!r})")
    if not 0 <= min_magnitude < math.inf:
        raise CompareError(f"history: the smallest change must be a fraction >= 0, e.g. {MIN_MAGNITUDE:g} "
                           f"(got {min_magnitude!r})")
    found, track_notes = tracks(points)
    last = len(points) - 1
    few = 0
    for track in found:
        if len(track.values) < MIN_RUNS:
            track.analysed = False
            few += 1
            continue
        track.changes = judge(track, change_points(track.values, window_len, max_pvalue, min_magnitude), last,
                              limits)
        if track.positions[-1] == last:  # what the latest run adds: regressions its history did not show before
            earlier = without_latest(track)
            known = {c.position for c in judge(earlier, change_points(earlier.values, window_len, max_pvalue,
                                                                      min_magnitude), last, limits)
                     if c.regression}
            for change in track.changes:
                change.latest = change.position == last or (change.regression and change.position not in known)
    all_notes = [*notes, *track_notes]
    if few:
        all_notes.append(f"{few} figure series measured in fewer than {MIN_RUNS} runs: shown, not searched for "
                         "change points")
    return History(points=list(points), tracks=found, limits=limits, max_pvalue=max_pvalue, window_len=window_len,
                   min_magnitude=min_magnitude, notes=all_notes)
