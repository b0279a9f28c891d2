"""The one judge of A against B: for one figure of a baseline (A) and a candidate (B), each one run or several
(repeats), what changed, whether it passes its threshold, whether it is beyond the noise, and the words of the
verdict. `loadtest compare` (and through it the baseline gate of `loadtest run --baseline` and the upgrade
rehearsal), the change points of `loadtest history` and the variants of a lesson are all judged here; report/
only renders what this returns. The rank test is stats.py's, the thresholds and cut-offs rules.py's.

A regression (compare, history). Every compared figure is lower-is-better. Steps are matched by index; figures
by chart and name (figures.py, the same figures the run report draws). Each side's figure is the median of its
runs' values. A figure regresses when B's median is worse than A's by more than the rule of its kind allows
(REGRESSION_DEFAULTS, overridable) and the change is beyond the noise:

- where both sides have enough runs for a test to be able to decide (3 or more each, and enough for p < alpha
  to be reachable at all), a two-sided Mann-Whitney U test (stats.py) gives p < alpha;
- otherwise (single runs, or too few), B exceeds A by more than the figure's recorded noise floor allows: the
  largest run-to-run spread measured for that figure (noise.py, written by benchmarks/noise_floor.py);
- a figure with neither is not noise-checked: a change past its threshold is shown as a change, not a
  regression (it cannot tell a change from noise), and the comparison still passes.

A change past the threshold within the noise is marked "~", benchstat's mark, and is no regression. A value the
histogram gives only as a bound ("< 50 ms": the first bucket; "> 60 s": the open last one) is compared as a bound:
B is worse only when its lowest possible value exceeds A's highest possible one, and the change shown is the least
change the bounds allow ("≥ +291 %"). Count-like figures (5xx, 429) are treated the same way: the median count
per side, not the sum, so sides with different numbers of runs compare fairly and one bad run among several is
noise, not a verdict. A history's change point is judged by the same direction and threshold, its segments' means
standing for the sides (history.py finds the points).

A lesson's effect (the setup a field report warns against, A, against its fix, B): the effect is the ratio of
the medians oriented so that above 1 is the direction the report describes, and the verdict rests on the runs
alone (see judge_effect): reproduced when they separate that way, not reproduced when they separate the other
way or overlap where an effect of the report's size would have cleared the noise, inconclusive otherwise. Where
the runs separate as described but the effect is a small fraction of what the report claimed (its log under
CLAIM_SHARE of the claim's: ×1.08 where the report saw ×10), the verdict stays "reproduced" (the runs did
separate) and the judge says so in other words: SEPARATED_SMALL, so a headline never reads the same for both.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from loadtests.analysis import figures, noise, stats
from loadtests.analysis.formats import in_unit, times
from loadtests.analysis.noise import Noise, NoiseFloor, NoiseFloors
from loadtests.analysis.rules import Cutoffs, cutoffs, limits_from, rule_text, threshold
from loadtests.analysis.samples import Reading, Side, readings
from loadtests.config.lesson import Measure
from loadtests.config.plan import REGRESSION_DEFAULTS
from loadtests.errors import CompareError

NOT_SIGNIFICANT = "~"  # benchstat's mark: no significant difference between the sides (within the noise)
NOT_NOISE_CHECKED = "not noise-checked"


# ---- one figure, A against B: direction, change, threshold ----------------------------------------------------


def direction(a_low: float, a_high: float, b_low: float, b_high: float) -> str:
    """Which way B lies from A, each where its value truly lies (low..high; a point without bounds): "up" (worse:
    every judged figure is lower-is-better), "down" (better), "same" or "overlap" (bounds that allow either)."""
    if (a_low, a_high) == (b_low, b_high):
        return "same"
    if b_low > a_high:
        return "up"
    if b_high < a_low:
        return "down"
    return "overlap"


def least_change(a_low: float, a_high: float, b_low: float, b_high: float) -> float | None:
    """B against A as a fraction, the least change the bounds allow (the change itself without bounds); None
    where they allow either direction or A is 0 or unbounded on the side that counts."""
    way = direction(a_low, a_high, b_low, b_high)
    if way == "up":
        return (b_low - a_high) / abs(a_high) if a_high else None
    if way == "down":
        return (b_high - a_low) / abs(a_low) if a_low and not math.isinf(a_low) else None
    if way == "same":
        return 0.0 if a_high else None
    return None


def past_threshold(rule: str, a_low: float, a_high: float, b_low: float, b_high: float,
                   limits: dict[str, float]) -> bool:
    """Whether B is worse than A past the rule's threshold, bounds at their worst for a regression: B's lowest
    possible value over the threshold of A's highest."""
    return direction(a_low, a_high, b_low, b_high) == "up" and b_low > threshold(rule, a_high, limits)


def interval(found: list[Reading]) -> tuple[float, float]:
    """Where the median of these readings lies: between the median of their lowest possible values and that of
    their highest (a median never falls when a value rises); "<" is at most its value (down to 0), ">" at least."""
    lows = [0.0 if bound == "<" else value for value, bound in found]
    highs = [math.inf if bound == ">" else value for value, bound in found]
    return stats.summarize(lows).median, stats.summarize(highs).median


def bound_mark(low: float | None, high: float | None) -> str:
    """How a value that lies in low..high is only a bound: "<" (at most high), ">" (at least low), "–" (between
    the two), or "" (a value, or unknown)."""
    if low is None or high is None or low == high:
        return ""
    if math.isinf(high):
        return ">"
    return "<" if low == 0 else "–"


def interval_text(value: float, low: float, high: float, unit: str) -> str:
    """A value for people, as the bound it is where the histogram gives no more: "< 50.0 ms", "> 60.00 s"."""
    bound = bound_mark(low, high)
    if bound == ">":
        return f"> {in_unit(low, unit)}"
    if bound == "<":
        return f"< {in_unit(high, unit)}"
    if bound == "–":
        return f"{in_unit(low, unit)}–{in_unit(high, unit)}"
    return in_unit(value, unit)


def why_unchecked(na: int, nb: int, runs: tuple[int, int], alpha: float) -> str:
    """Why a figure's verdict cannot weigh the noise with a rank test, or "" when it can."""
    if runs == (1, 1):
        return "single runs"
    if na < stats.MIN_SAMPLES or nb < stats.MIN_SAMPLES:
        return f"{na} vs {nb} values, fewer than {stats.MIN_SAMPLES} a side"
    if stats.min_p_value(na, nb) >= alpha:
        return f"{na} vs {nb} values cannot reach p < {alpha:g}"
    return ""


def rank_p(a: list[float], b: list[float]) -> float | None:
    """The two-sided Mann-Whitney p of A against B, where both sides have MIN_SAMPLES values or more."""
    if len(a) >= stats.MIN_SAMPLES and len(b) >= stats.MIN_SAMPLES:
        return stats.mann_whitney_u(a, b).p
    return None


def beyond_noise(way: str, b_low: float, b_high: float, cut: Cutoffs) -> bool | None:
    """Whether B moved from A (either way) beyond the figure's recorded noise; None without a record, or where a
    bound allows either direction."""
    if cut.noise_above is None or cut.noise_below is None or way == "overlap":
        return None
    if way == "up":
        return b_low > cut.noise_above
    if way == "down":
        return b_high < cut.noise_below
    return False


@dataclass
class Row:
    """One figure of one step on both sides: `a` and `b` are the medians of each side's values (a bound counted
    as its value); a_low..a_high (b_low..b_high) is where that median truly lies when some values are only
    histogram bounds (a single point otherwise). The report of repeats (repeats.py) shows its figures as rows
    with side A only."""

    step_index: int
    step_name: str
    nodes: int
    chart: str
    name: str
    unit: str
    rule: str
    a: float | None
    b: float | None
    regression: bool = False
    rule_text: str = ""
    a_values: list[float] = field(default_factory=list)
    b_values: list[float] = field(default_factory=list)
    past_threshold: bool = False  # B's median worse than A's beyond the rule (bounds taken at their worst for it)
    p_value: float | None = None  # Mann-Whitney U, when both sides have MIN_SAMPLES values or more
    alpha: float = REGRESSION_DEFAULTS["alpha"]
    unchecked: str = ""  # why the runs cannot weigh the noise themselves ("" when the U test can)
    a_low: float | None = None
    a_high: float | None = None
    b_low: float | None = None
    b_high: float | None = None
    floor: Noise | None = None  # the recorded noise the verdict was weighed against, when the runs could not
    floor_missing: str = ""  # why there was none to weigh against
    beyond_noise: bool | None = None  # B moved from A beyond the recorded noise (None: not weighed against it)

    @property
    def label(self) -> str:
        return f"{figures.CHARTS[self.chart].short} {self.name}"

    @property
    def origin(self) -> str:
        """Where the figure comes from: client side, apiserver, etcd or process."""
        return figures.CHARTS[self.chart].source.split(" · ")[0]

    @property
    def compared(self) -> bool:
        return self.a is not None and self.b is not None

    @property
    def tested(self) -> bool:
        """Whether a U test that could decide weighed the difference against the runs' own noise."""
        return self.compared and self.p_value is not None and not self.unchecked

    @property
    def noise_checked(self) -> bool:
        """Whether the verdict weighed the difference against the noise: a U test that could decide, or the
        figure's recorded noise floor."""
        return self.tested or (self.compared and self.floor is not None)

    @property
    def mark(self) -> str:
        """"~" when the sides differ within the noise (no significant difference, or within the recorded noise);
        empty otherwise (or when not noise-checked)."""
        if self.tested:
            return NOT_SIGNIFICANT if self.p_value >= self.alpha else ""
        return NOT_SIGNIFICANT if self.noise_checked and self.beyond_noise is False else ""

    @property
    def within_text(self) -> str:
        """Why a "~" row is within the noise, in words."""
        if self.tested:
            return f"no significant difference (alpha {self.alpha:g})"
        return f"within the recorded noise: {self.floor.text}" if self.floor is not None else ""

    @property
    def not_significant_past_threshold(self) -> bool:
        """Past the threshold on the medians, but within the noise: what a comparison blind to noise would flag."""
        return self.past_threshold and self.mark == NOT_SIGNIFICANT

    @property
    def unchecked_change(self) -> bool:
        """Past the threshold with nothing to weigh it against: a change, not noise-checked, not a regression."""
        return self.past_threshold and not self.noise_checked

    def summary(self, side: str) -> stats.Summary | None:
        values = self.a_values if side == "a" else self.b_values
        return stats.summarize(values) if values else None

    def _interval(self, side: str) -> tuple[float | None, float | None]:
        return (self.a_low, self.a_high) if side == "a" else (self.b_low, self.b_high)

    def bound(self, side: str) -> str:
        """"<" (the median is at most the value shown), ">" (at least it), "–" (between two values), or ""."""
        return bound_mark(*self._interval(side))

    def median_text(self, side: str) -> str:
        """The side's median, as a bound where the histogram gives no more: "< 50.0 ms", "> 60.00 s"."""
        found = self.summary(side)
        if found is None:
            return "—"
        return interval_text(found.median, *self._interval(side), self.unit)

    def side_text(self, side: str) -> str:
        """The side's median, with its spread and sample count when it has several values."""
        found = self.summary(side)
        if found is None:
            return "—"
        text = self.median_text(side)
        return text if found.n == 1 else f"{text} {stats.spread_text(found)} (n={found.n})"

    def spread(self, side: str) -> str:
        """"± 3 %" for a side of several values; empty otherwise."""
        found = self.summary(side)
        return "" if found is None else stats.spread_text(found)

    def spread_title(self, side: str) -> str:
        """min–max of the side's values, for a tooltip; what a bound means."""
        found = self.summary(side)
        bound = {"<": "a histogram bound: at most this (the first bucket)",
                 ">": "a histogram bound: at least this (the open last bucket)",
                 "–": "some values are only histogram bounds: the median lies in this range"}.get(self.bound(side), "")
        if found is None or found.n < 2:
            return bound
        text = f"n={found.n}, min {in_unit(found.low, self.unit)}, max {in_unit(found.high, self.unit)}"
        return f"{text}; {bound}" if bound else text

    @property
    def p_text(self) -> str:
        return "" if self.p_value is None else stats.p_text(self.p_value)

    @property
    def noise_text(self) -> str:
        """How the verdict weighed the noise when the runs could not ("" when a U test did)."""
        if not self.compared or not self.unchecked:
            return ""
        if self.floor is not None:
            where = "beyond" if self.beyond_noise else "within"
            return f"{where} the recorded noise: {self.floor.text}"
        return f"{NOT_NOISE_CHECKED}: {self.unchecked}, {self.floor_missing}"

    def describe(self) -> str:
        """"A 100 ms ± 3 % (n=4) → B 300 ms ± 2 % (n=4) (+200 %, p=0.029)", for stdout and JUnit."""
        extras = [] if self.change_pct is None else [f"{self.change_prefix}{self.change_pct:+.0f} %"]
        if self.direction == "overlap":
            extras.append("a histogram bound: cannot tell")
        if self.p_value is not None:
            extras.append(self.p_text)
        if self.noise_text:
            extras.append(self.noise_text)
        text = f"A {self.side_text('a')} → B {self.side_text('b')}"
        return f"{text} ({', '.join(extras)})" if extras else text

    @property
    def change_pct(self) -> float | None:
        """B against A in %; with bounds, the least change they allow (see change_prefix), None where they allow
        either direction."""
        if not self.compared or self.a_low is None or not self.direction:
            return None
        found = least_change(self.a_low, self.a_high, self.b_low, self.b_high)
        return None if found is None else found * 100

    @property
    def change_prefix(self) -> str:
        """"≥ " (worse by at least) or "≤ " (better by at least) where a side is only a bound; "" otherwise."""
        if not (self.bound("a") or self.bound("b")):
            return ""
        return {"up": "≥ ", "down": "≤ "}.get(self.direction, "")

    @property
    def direction(self) -> str:
        """"up" (worse: every compared figure is lower-is-better), "down" (better), "same", "overlap" (a bound
        that allows either) or "" (missing)."""
        if not self.compared or None in (self.a_low, self.a_high, self.b_low, self.b_high):
            return ""
        return direction(self.a_low, self.a_high, self.b_low, self.b_high)

    @property
    def status(self) -> str:
        if self.a is None:
            return "only in B"
        if self.b is None:
            return "only in A"
        if self.regression:
            return "regression"
        if self.mark:
            return self.mark
        if self.unchecked_change:
            return f"worse, {NOT_NOISE_CHECKED}"
        return {"up": "worse, within margin", "down": "better", "same": "same",
                "overlap": "within a histogram bound"}[self.direction]


@dataclass
class CompareResult:
    a_run_id: str
    b_run_id: str
    rows: list[Row]
    thresholds: dict[str, float]
    notes: list[str] = field(default_factory=list)
    run_regressions: list[str] = field(default_factory=list)  # run-level: B aborted where A completed
    html_path: Path | None = None
    junit_path: Path | None = None
    a_runs: int = 1
    b_runs: int = 1
    noise: str = ""  # one line: how the verdicts weighed noise, or that they did not
    noise_floor: str = ""  # which measurement the recorded noise floor is

    @property
    def regressions(self) -> list[Row]:
        """Every regressed figure (run-level regressions, such as B aborting, are in run_regressions)."""
        return [r for r in self.rows if r.regression]

    @property
    def not_significant(self) -> list[Row]:
        """Figures past their threshold on the medians that were found within the noise ("~")."""
        return [r for r in self.rows if r.not_significant_past_threshold]

    @property
    def unchecked_changes(self) -> list[Row]:
        """Figures past their threshold with no noise to weigh them against: changes, not regressions."""
        return [r for r in self.rows if r.unchecked_change]

    @property
    def noise_checked(self) -> bool:
        return any(r.noise_checked for r in self.rows)

    @property
    def passed(self) -> bool:
        return not self.regressions and not self.run_regressions

    @property
    def label(self) -> str:
        """The banner's word: REGRESSION, CHANGES (past a threshold, not noise-checked) or PASS."""
        if not self.passed:
            return "REGRESSION"
        return "CHANGES" if self.unchecked_changes else "PASS"

    @property
    def state(self) -> str:
        """The banner's colour: fail, skip (changes not noise-checked) or pass."""
        return {"REGRESSION": "fail", "CHANGES": "skip"}.get(self.label, "pass")

    @property
    def headline(self) -> str:
        """One line for people and CI logs."""
        compared = sum(r.compared for r in self.rows)
        tail = ""
        if any(r.tested for r in self.rows):
            marked = sum(bool(r.mark) and r.tested for r in self.rows)
            tail += f"; {marked} {NOT_SIGNIFICANT} (no significant difference, alpha {self.thresholds['alpha']:g})"
        if any(r.noise_checked and not r.tested for r in self.rows):
            marked = sum(bool(r.mark) and not r.tested for r in self.rows)
            tail += f"; {marked} {NOT_SIGNIFICANT} (within the recorded run-to-run noise)"
        changed = len(self.unchecked_changes)
        if changed:
            tail += f"; {changed} change{'s' if changed != 1 else ''}, {NOT_NOISE_CHECKED}"
        if self.passed:
            return f"no regression in {compared} compared figures{tail}"
        parts = []
        if self.regressions:
            parts.append(f"{len(self.regressions)} regression(s) in {compared} compared figures{tail}")
        return "; ".join(parts + self.run_regressions)


def check_comparable(a: Side, b: Side, force: bool) -> list[str]:
    """Refuse runs of different plans or different scales unless forced; return notes on what was forced."""
    notes = []
    if a.plan_digest != b.plan_digest:
        line = (f"cannot compare {a.run_id} with {b.run_id}: their plans differ (digest {a.plan_digest} vs "
                f"{b.plan_digest}: other steps or load); pass --force to compare anyway")
        if not force:
            raise CompareError(line)
        notes.append(f"plans differ (digest {a.plan_digest} vs {b.plan_digest}); compared anyway (forced)")
    b_steps = {s.index: s for s in b.steps}
    for step in a.steps:
        other = b_steps.get(step.index)
        if other is not None and other.nodes != step.nodes:
            line = (f"cannot compare step {step.index}: {step.nodes} nodes in {a.run_id} but {other.nodes} in "
                    f"{b.run_id}; pass --force to compare anyway")
            if not force:
                raise CompareError(line)
            notes.append(f"step {step.index} has {step.nodes} nodes in A and {other.nodes} in B (forced)")
    a_only = sorted({s.index for s in a.steps} - set(b_steps))
    b_only = sorted(set(b_steps) - {s.index for s in a.steps})
    if a_only:
        notes.append(f"step(s) {', '.join(map(str, a_only))} only in A: B recorded fewer steps")
    if b_only:
        notes.append(f"step(s) {', '.join(map(str, b_only))} only in B: A recorded fewer steps")
    return notes


def _plan_name(side: Side) -> str:
    return str(side.first.plan.get("name", "")) if isinstance(side.first.plan, dict) else ""


def rows(a: Side, b: Side, limits: dict[str, float], floor: NoiseFloors | NoiseFloor | None = None) -> list[Row]:
    """Every compared figure of every step present on either side, A's order first, each judged. Where the runs
    cannot weigh the noise themselves, `floor` (the recorded noise floor; none: every such verdict is not
    noise-checked) does."""
    floors = noise.as_floors(floor)
    a_found, a_rules = readings(a)
    b_found, b_rules = readings(b)
    rules = a_rules | {k: v for k, v in b_rules.items() if k not in a_rules}
    steps = {s.index: s for s in b.steps} | {s.index: s for s in a.steps}
    plans, digests = {_plan_name(a), _plan_name(b)}, {a.plan_digest, b.plan_digest}
    found = []
    for index in sorted(steps):
        step = steps[index]
        for key in list(a_found) + [k for k in b_found if k not in a_found]:
            ra = a_found.get(key, {}).get(index, [])
            rb = b_found.get(key, {}).get(index, [])
            if not ra and not rb:
                continue
            va, vb = [v for v, _ in ra], [v for v, _ in rb]
            rule = rules[key]
            row = Row(step_index=index, step_name=step.name, nodes=step.nodes, chart=key[0], name=key[1],
                      unit=figures.CHARTS[key[0]].unit, rule=rule, rule_text=rule_text(rule, limits),
                      a=stats.summarize(va).median if va else None, b=stats.summarize(vb).median if vb else None,
                      a_values=va, b_values=vb, alpha=limits["alpha"])
            if ra:
                row.a_low, row.a_high = interval(ra)
            if rb:
                row.b_low, row.b_high = interval(rb)
            if row.compared:
                judge_row(row, (a.n, b.n), limits, partial(floors.lookup, key, plans, digests, index))
            found.append(row)
    return found


def judge_row(row: Row, runs: tuple[int, int], limits: dict[str, float],
              floor: Callable[[], tuple[Noise | None, str]]) -> None:
    """Judge one compared figure in place: past its threshold, beyond the noise (the rank test where the runs
    allow it, else the recorded noise floor that `floor` looks up), and so a regression or not."""
    alpha = limits["alpha"]
    row.p_value = rank_p(row.a_values, row.b_values)
    row.unchecked = why_unchecked(len(row.a_values), len(row.b_values), runs, alpha)
    if row.unchecked:
        row.floor, row.floor_missing = floor()
    row.past_threshold = past_threshold(row.rule, row.a_low, row.a_high, row.b_low, row.b_high, limits)
    if row.unchecked:
        cut = cutoffs(row.rule, row.a_low, row.a_high, limits, row.floor)
        row.beyond_noise = beyond_noise(row.direction, row.b_low, row.b_high, cut)
    row.regression = row.past_threshold and (row.p_value < alpha if row.tested else bool(row.beyond_noise))


def _why_untested(a: Side, b: Side, alpha: float) -> str:
    """Why the runs of both sides cannot weigh the noise themselves, or "" when they can."""
    if a.n == 1 and b.n == 1:
        return "single runs"
    if a.n < stats.MIN_SAMPLES or b.n < stats.MIN_SAMPLES:
        return f"A {a.n} run(s), B {b.n}, fewer than {stats.MIN_SAMPLES} a side"
    if stats.min_p_value(a.n, b.n) >= alpha:
        return f"{a.n} vs {b.n} runs can never reach p < {alpha:g}"
    return ""


def which_floor(a: Side, b: Side, floors: NoiseFloors) -> str:
    """Which recorded noise floor weighs a comparison of these sides, in one phrase."""
    return floors.describe({_plan_name(a), _plan_name(b)}, {a.plan_digest, b.plan_digest})


def _floor_text(floored: int, bare: int, floor: str, missing: str) -> str:
    """The part of the noise line on the figures weighed against the recorded noise floor (`floor`: which), and
    those without."""
    parts = []
    if floored:
        parts.append(f"{floored} figure(s) weighed against their recorded noise floor ({floor}): a "
                     "change past its threshold is a regression only beyond the largest run-to-run spread measured "
                     "there for that figure")
    if bare:
        parts.append(f"{bare} figure(s) {NOT_NOISE_CHECKED} ({missing}): a change past its threshold there is shown "
                     "as a change, never a regression")
    return "; ".join(parts)


def noise_line(a: Side, b: Side, found: list[Row], alpha: float, floor: NoiseFloors | NoiseFloor | None = None) -> str:
    """One line saying how the verdicts weighed run-to-run noise (which measurement), or that they could not."""
    floor = which_floor(a, b, noise.as_floors(floor))
    need = stats.samples_needed(alpha)
    advice = f"repeat each side {need} or more times (loadtest run --repeat {need}) for a significance test"
    untested = [r for r in found if r.compared and r.unchecked]
    floored = sum(r.floor is not None for r in untested)
    bare = len(untested) - floored
    missing = next((r.floor_missing for r in untested if r.floor is None), "")
    why = _why_untested(a, b, alpha)
    if why:
        if not floored:
            return (f"verdicts {NOT_NOISE_CHECKED} ({why}): a change past its threshold is shown as a change, never "
                    f"a regression, with no recorded noise to weigh it against ({missing or 'no figure compared'}); "
                    f"{advice}")
        return f"verdicts weighed against the recorded noise ({why}): {_floor_text(floored, bare, floor, missing)}; " \
               f"{advice}"
    line = (f"noise-checked: medians of {a.n} (A) and {b.n} (B) runs; a change past its threshold is a regression "
            f"only when significant (Mann-Whitney U, p < {alpha:g}); {NOT_SIGNIFICANT} = no significant difference")
    if untested:
        line += f"; measured in too few runs: {_floor_text(floored, bare, floor, missing)}"
    return line


def run_regressions(a: Side, b: Side) -> list[str]:
    """B's runs that did not complete where every run of A did."""
    failed = b.incomplete
    if not failed or a.incomplete:
        return []
    if b.n == 1:
        run = b.first
        return [f"B did not complete ({run.status}: {run.error or 'no error recorded'})"]
    which = "; ".join(f"{folder.name}: {run.status}: {run.error or 'no error recorded'}" for run, folder in failed)
    return [f"{len(failed)} of {b.n} runs of B did not complete ({which})"]


def judge_sides(a: Side, b: Side, thresholds: dict[str, Any] | None = None, force: bool = False,
                floor: NoiseFloors | NoiseFloor | None = None) -> CompareResult:
    """Side B (candidate) judged against side A (baseline), figure by figure and run by run: what compare.html,
    the JUnit files, the baseline gate and the upgrade rehearsal show. Runs of different plans or scales are
    refused unless `force`; `floor`: the recorded noise (default: noise.load())."""
    limits = limits_from(thresholds)
    floor = noise.as_floors(floor if floor is not None else noise.load())
    notes = a.notes + b.notes + check_comparable(a, b, force)
    found = rows(a, b, limits, floor)
    return CompareResult(a_run_id=a.run_id, b_run_id=b.run_id, rows=found, thresholds=limits, notes=notes,
                         run_regressions=run_regressions(a, b), a_runs=a.n, b_runs=b.n,
                         noise=noise_line(a, b, found, limits["alpha"], floor), noise_floor=which_floor(a, b, floor))


# ---- a lesson's effect: the warned setup against its fix ------------------------------------------------------

# Runs a side needs before a verdict: with fewer, the run-to-run noise is not measured (lesson DEFAULT_REPEAT).
MIN_RUNS = stats.MIN_SAMPLES


ALPHA = 0.05  # the rank test's level, where the repeats are enough for it to reach it


SINGLE_RUN = "single run"


TOO_FEW_RUNS = "too few runs"


CHECK_HOLDS, CHECK_FAILS = "check holds", "check fails"


UNJUDGED = (SINGLE_RUN, TOO_FEW_RUNS, "not measured")


JUDGED = ("reproduced", "not reproduced", "inconclusive")


# A separation counts as far smaller than claimed when its effect's log is under this share of the claim's log:
# a quarter on the log scale is ×1.78 against ×10, ×1.11 against ×1.5.
CLAIM_SHARE = 0.25


SEPARATED_SMALL = "separated, far smaller than claimed"


def ratio(warned: float, fix: float) -> float:
    """warned / fix, with a zero side made explicit: ∞ when only the fix is zero, 1 when both are."""
    if fix == 0:
        return 1.0 if warned == 0 else math.inf
    if warned == 0:
        return 0.0
    return warned / fix


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
    """What the runs say, the side the report expects higher taken as B: whether every run of it lies beyond
    every run of the other is the same question `direction` answers for compare's intervals (the runs' range
    standing for each side), and the rank test is stats.py's, where the runs can reach ALPHA."""
    high, low = (fix, warned) if measure.expect == "lower" else (warned, fix)
    pooled = [*warned, *fix]
    smallest = min(pooled)
    p = (stats.mann_whitney_u(high, low).p
         if stats.min_p_value(len(high), len(low)) < ALPHA else None)
    way = direction(min(low), max(low), min(high), max(high))
    return Evidence(effect=_oriented(measure, statistics.median(warned), statistics.median(fix)),
                    runs=min(len(warned), len(fix)), up=way == "up", down=way == "down", p=p,
                    range_ratio=max(pooled) / smallest if smallest > 0 else math.inf)


def judge_effect(measure: Measure, found: Evidence, bounded: str = "") -> tuple[str, str]:
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
    claimed: float | None = None  # the effect the field report claimed or implies, oriented as `effect`
    claim: str = ""  # that claim in words: "the report saw ×10", "the report implies at least ×1.5"
    size: str = ""  # SEPARATED_SMALL where the runs separate as described but the effect is far smaller

    @property
    def word(self) -> str:
        """The verdict in the headline's words: SEPARATED_SMALL rather than "reproduced" for a small effect."""
        return self.size or self.verdict

    @property
    def headline(self) -> str:
        """The comparison as a lesson's headline says it: the verdict's word, then the reason with the effect
        measured set beside the report's claim ("×1.08 where the report saw ×10")."""
        reason = self.reason
        if self.claim and self.effect is not None:
            shown = times(self.effect, self.effect_prefix)
            reason = reason.replace(shown, f"{shown} where {self.claim}", 1)
        return f"{self.word}: {reason}" if self.verdict in JUDGED else reason


@dataclass(frozen=True)
class Claim:
    """What the field report claimed of a measure, as an effect oriented like the measured one, and in words."""

    effect: float
    said: str


def far_smaller(effect: float, claimed: float) -> bool:
    """Whether a measured effect is a small fraction of the claimed one: under CLAIM_SHARE of it on the log
    scale, where effects multiply (×1.08 against ×10: 0.08 against 2.3; ×7.6 against ×10 is not). A claim of
    ×1 or less, or an effect that is not a number above 0, says nothing of size."""
    if claimed <= 1 or effect <= 0 or math.isinf(effect) or math.isnan(effect):
        return False
    return math.log(effect) < CLAIM_SHARE * math.log(claimed)


def side_bound(readings: list[tuple[float, str]]) -> str:
    """The bound every reading of one side shares, else "" (a median of bounds is a bound too)."""
    found = {bound for _, bound in readings}
    return found.pop() if len(found) == 1 else ""


def _oriented(measure: Measure, warned: float, fix: float) -> float:
    return ratio(fix, warned) if measure.expect == "lower" else ratio(warned, fix)


def compare_variants(measure: Measure, warned: list[float], fix: list[float], against: str, warned_bound: str = "",
                     fix_bound: str = "", why_missing: str = "", claim: Claim | None = None) -> Comparison:
    """The effect of one measure and its verdict, from the runs of both sides, set beside what the field report
    claimed (`claim`): a headline must say how large the effect was, not only that the runs separated."""
    found = _compared(measure, warned, fix, against, warned_bound, fix_bound, why_missing)
    if claim is not None and not found.check and found.effect is not None:
        found.claimed, found.claim = claim.effect, claim.said
        if found.verdict == "reproduced" and far_smaller(found.effect, claim.effect):
            found.size = SEPARATED_SMALL
    return found


def _compared(measure: Measure, warned: list[float], fix: list[float], against: str, warned_bound: str,
              fix_bound: str, why_missing: str) -> Comparison:
    """The effect and its verdict from the runs alone: none from fewer than MIN_RUNS a side (the noise is then
    not measured), none from a sanity check (it says only whether it holds)."""
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
    verdict, reason = judge_effect(measure, found, bounded)
    return Comparison(measure.name, against, warned, fix, effect, noise, noise_from, verdict, reason, measure.unit,
                      warned_bound, fix_bound, p_value=found.p, effect_prefix=effect_prefix(bounded))
