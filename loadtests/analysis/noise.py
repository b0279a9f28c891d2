"""The recorded noise floor: how far each compared figure moved between runs of one build, measured, not assumed.

`benchmarks/noise_floor.py` runs a plan several times (or reads runs already made) and writes, per figure
(chart, name) and step, how far above a first run of the build a second one may be: a 99 % prediction interval
for the ratio of two runs (stats.prediction_ratio: from the standard deviation of the runs' logs and Student's t,
so wider than the runs' own max / min and wider the fewer the runs), and the range (max - min) for figures where
a run gave 0 (no ratio). A comparison whose runs cannot weigh the noise themselves (single runs, or too few for
the U test) calls a change a regression only beyond that step's floor (beyond the figure's widest step where
that step gave none); a figure with no recorded spread is not noise-checked, and never a regression. The
false alarms and misses of this rule on recorded runs are in benchmarks/results/noise_floor_check.md.

A step's spread is recorded only where at least stats.MIN_SAMPLES runs gave a value and none of them was only a
histogram bound ("< 50 ms" in every run is no measured spread). The file is package data,
loadtests/data/noise_floor.json, or the file named by LOADTEST_NOISE_FLOOR, and holds one floor per plan measured.

A comparison of a plan uses that plan's own floor, if one was measured on the plan as it is now (its digest). A
plan without one (never measured, changed since, or two plans compared by force) is weighed, figure by figure,
against the widest spread recorded for that figure on any plan, and says so: a change beyond every spread ever
measured is beyond the noise, whichever plan it came from.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from loadtests import PACKAGE_DIR
from loadtests.analysis import figures, formats, stats
from loadtests.analysis.samples import Key, Side, readings
from loadtests.errors import CompareError, read_text

NOISE_FLOOR_FILE = PACKAGE_DIR / "data" / "noise_floor.json"
NOISE_FLOOR_ENV = "LOADTEST_NOISE_FLOOR"  # another noise floor file, e.g. one measured on the CI machine
FILE_NOTE = ("one noise floor per plan, each measured by benchmarks/noise_floor.py (see benchmarks/results/"
             "noise_floor_<plan>.md); read by loadtests/analysis/noise.py")
EMPTY_NOTE = ("no noise floor recorded yet: run `.venv/bin/python benchmarks/noise_floor.py` (it runs the smoke plan "
              "5 times) to measure it; until then every single-run comparison is not noise-checked")


def key_text(key: Key) -> str:
    """"chart: name", as figures.Series.key spells a figure."""
    return f"{key[0]}: {key[1]}"


def label(key: Key) -> str:
    """"server p99 POST pods", as tables name a figure."""
    chart = figures.CHARTS.get(key[0])
    return f"{chart.short} {key[1]}" if chart else key_text(key)


@dataclass(frozen=True)
class StepSpread:
    """One figure's values at one step across the noise runs."""

    step_index: int
    step_name: str
    nodes: int
    values: tuple[float, ...]
    bound: str = ""  # "<" or ">" where a run's value was only a histogram bound: then no measured spread
    bounds: int = 0  # how many of the runs' values were only a bound

    @property
    def bounded(self) -> bool:
        return bool(self.bound)

    @property
    def measured(self) -> bool:
        return not self.bounded and len(self.values) >= stats.MIN_SAMPLES

    @property
    def spread_pct(self) -> float:
        """max / min - 1, in %: how much higher than the lowest run the highest one was (infinite past a 0)."""
        low, high = min(self.values), max(self.values)
        if high == low:
            return 0.0
        return math.inf if low <= 0 else (high / low - 1) * 100

    @property
    def spread_abs(self) -> float:
        return max(self.values) - min(self.values)


@dataclass(frozen=True)
class NoiseRecord:
    """A figure's run-to-run spread at one step of a plan's noise runs, or its largest over every step measured
    (step_index None), and what it was measured on."""

    chart: str
    name: str
    spread_pct: float | None  # None: infinite (a run gave 0 where another did not); spread_abs decides then
    spread_abs: float  # the largest max - min of any measured step, in the figure's unit
    runs: int  # the runs at the step of the largest spread
    step: str  # that step's name
    plan: str
    date: str
    step_index: int | None = None  # the step this spread was measured at; None: the largest over the steps
    runs_spread_pct: float | None = None  # the noise runs' own max / min - 1 there (None: a run gave 0, or not kept)

    @property
    def unit(self) -> str:
        chart = figures.CHARTS.get(self.chart)
        return chart.unit if chart else "count"

    def ceiling(self, low: float) -> float:
        """The highest value still within the recorded noise of `low`: as high above it as the highest of the
        noise runs was above their lowest."""
        if math.isinf(low):
            return math.inf
        if self.spread_pct is None:
            return low + self.spread_abs
        return low * (1 + self.spread_pct / 100)

    def floor_of(self, high: float) -> float:
        """The lowest value whose ceiling still reaches `high` (the ceiling's inverse): below it, a value is
        lower than `high` beyond the noise."""
        if math.isinf(high):
            return math.inf
        if self.spread_pct is None:
            return high - self.spread_abs
        return high / (1 + self.spread_pct / 100)

    def allows(self, a_high: float, b_low: float) -> bool:
        """Whether B (at least b_low) over A (at most a_high) is within the recorded noise: no higher than the
        highest run of the noise runs was over their lowest."""
        return b_low <= self.ceiling(a_high)

    @property
    def text(self) -> str:
        """"a second run up to +134 % above a first at 100 nodes (99 % prediction from 5 runs of plan default,
        2026-12-05, which spread +38 %)"; the largest over the steps says its step ("at its widest step, ...")."""
        if self.spread_pct is None:
            return (f"run to run up to {formats.in_unit(self.spread_abs, self.unit)} apart, a run gave 0 "
                    f"({self.runs} runs of plan {self.plan}, {self.date})")
        at = f"at {self.step}" if self.step_index is not None else f"at its widest step, {self.step}"
        spread = f", which spread +{self.runs_spread_pct:.0f} %" if self.runs_spread_pct is not None else ""
        level = f"{(1 - stats.PREDICTION_ALPHA) * 100:.0f} % prediction from "
        return (f"a second run up to +{self.spread_pct:.0f} % above a first {at} ({level}{self.runs} runs of plan "
                f"{self.plan}, {self.date}{spread})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NoiseFloor:
    """The recorded spread of every figure measured, and where it came from."""

    records: dict[str, NoiseRecord] = field(default_factory=dict)  # key_text -> record
    plan: str = ""
    plan_digest: str = ""
    runs: int = 0
    date: str = ""
    machine: str = ""
    command: str = ""
    note: str = EMPTY_NOTE
    source: str = ""  # the file it was read from
    unmeasured: dict[str, str] = field(default_factory=dict)  # key_text -> why no spread was recorded
    steps: dict[str, dict[int, NoiseRecord]] = field(default_factory=dict)  # key_text -> step index -> its spread

    def describe(self) -> str:
        """Which measurement the noise floor is, in one phrase."""
        if not self.records:
            return f"no noise floor recorded ({self.source or 'none read'})"
        where = f" on {self.machine}" if self.machine else ""
        return f"{self.runs} runs of plan {self.plan}{where}, {self.date}: {self.source or 'noise floor'}"

    def to_dict(self) -> dict[str, Any]:
        return {"note": self.note, "plan": self.plan, "plan_digest": self.plan_digest, "runs": self.runs,
                "date": self.date, "machine": self.machine, "command": self.command,
                "figures": {k: r.to_dict() for k, r in sorted(self.records.items())},
                "unmeasured": dict(sorted(self.unmeasured.items())),
                "steps": {k: {str(i): r.to_dict() for i, r in sorted(per.items())}
                          for k, per in sorted(self.steps.items())}}


@dataclass(frozen=True)
class WidestRecord:
    """A figure's noise where the compared plan has no floor of its own: the widest spread recorded for it on any
    plan, so that only a change beyond every spread ever measured for the figure counts as beyond the noise."""

    records: tuple[NoiseRecord, ...]
    why: str  # why the plan's own floor does not apply

    def ceiling(self, low: float) -> float:
        return max(r.ceiling(low) for r in self.records)

    def floor_of(self, high: float) -> float:
        return min(r.floor_of(high) for r in self.records)

    def allows(self, a_high: float, b_low: float) -> bool:
        return b_low <= self.ceiling(a_high)

    @property
    def text(self) -> str:
        """"run to run up to +1069 % over 5 runs of plan smoke, ...; the widest recorded for any plan (...)"."""
        widest = max(self.records, key=lambda r: math.inf if r.spread_pct is None else r.spread_pct)
        return f"{widest.text}; the widest recorded for any plan ({self.why})"


Noise = NoiseRecord | WidestRecord


@dataclass
class NoiseFloors:
    """Every plan's recorded floor, as the file holds them: what a comparison weighs single runs against."""

    floors: dict[str, NoiseFloor] = field(default_factory=dict)  # plan name -> its floor
    source: str = ""

    def own(self, plans: set[str], digests: set[str]) -> tuple[NoiseFloor | None, str]:
        """The compared plan's own floor, or None and why it has none (its digest changed, none measured)."""
        if len(plans) != 1:
            return None, f"plans {', '.join(sorted(plans))} compared, no floor of their own"
        plan = next(iter(plans))
        found = self.floors.get(plan)
        if found is None or not found.records:
            return None, f"plan {plan or '(unnamed)'} has no noise floor of its own"
        if found.plan_digest and digests and digests != {found.plan_digest}:
            return None, (f"plan {plan}'s floor was measured on an earlier version of it (digest {found.plan_digest}, "
                          f"compared: {', '.join(sorted(digests))})")
        return found, ""

    def lookup(self, key: Key, plans: set[str], digests: set[str] = frozenset(),
               step: int | None = None) -> tuple[Noise | None, str]:
        """The figure's noise at a step (its index) for a comparison of these plans (their digests, where known):
        the plan's own spread at that step (the noise of a 100-node step is not a 1,000-node step's), else its
        largest over the plan's steps where that step gave no measured spread, else the widest recorded on any
        plan, or None and why there is none."""
        if not any(f.records for f in self.floors.values()):
            return None, f"no noise floor recorded in {self.source or 'loadtests/data/noise_floor.json'}"
        own, why = self.own(plans, digests)
        if own is not None and step in own.steps.get(key_text(key), {}):
            return own.steps[key_text(key)][step], ""
        if own is not None and key_text(key) in own.records:
            return own.records[key_text(key)], ""
        if own is not None:
            why = (f"plan {own.plan}'s own runs did not measure it: "
                   f"{own.unmeasured.get(key_text(key), 'not measured by the noise runs')}")
        found = tuple(f.records[key_text(key)] for f in self.floors.values() if key_text(key) in f.records)
        if not found:
            return None, f"no recorded noise for this figure on any plan ({why})"
        return WidestRecord(found, why), ""

    def describe(self, plans: set[str] = frozenset(), digests: set[str] = frozenset()) -> str:
        """Which measurement the noise floor of a comparison of these plans is, in one phrase."""
        measured = {p: f for p, f in sorted(self.floors.items()) if f.records}
        if not measured:
            return f"no noise floor recorded ({self.source or 'none read'})"
        own, why = self.own(set(plans), set(digests)) if plans else (None, "")
        if own is not None:
            return own.describe()
        every = "; ".join(f.describe() for f in measured.values())
        return f"{why}: the widest spread of each figure over every plan's floor ({every})" if why else every

    def to_dict(self) -> dict[str, Any]:
        return {"note": FILE_NOTE, "floors": {p: f.to_dict() for p, f in sorted(self.floors.items())}}

    def with_floor(self, floor: NoiseFloor) -> NoiseFloors:
        """These floors with `floor` as its plan's (a new measurement replaces the plan's old one)."""
        return NoiseFloors({**self.floors, floor.plan: floor}, self.source)


def as_floors(floor: NoiseFloor | NoiseFloors | None) -> NoiseFloors:
    """One plan's floor as the floors of the file, so callers that hold one floor are judged alike."""
    if isinstance(floor, NoiseFloors):
        return floor
    return NoiseFloors({floor.plan: floor}, floor.source) if floor is not None else NoiseFloors()


def _step_records(data: Any, where: str) -> dict[str, dict[int, NoiseRecord]]:
    """The per-step spreads of a floor's JSON form (none in a file written before they were kept)."""
    if not isinstance(data, dict):
        raise CompareError(f"{where}: expected a mapping of figures to their spread at each step")
    try:
        return {str(k): {int(i): _record(r, f"{where}.{k}.{i}") for i, r in per.items()} for k, per in data.items()}
    except (AttributeError, ValueError) as error:
        raise CompareError(f"{where}: not a mapping of step indexes to spreads ({error})") from None


def _record(data: Any, where: str) -> NoiseRecord:
    if not isinstance(data, dict):
        raise CompareError(f"{where}: expected a mapping (chart, name, spread_pct, spread_abs, runs, ...)")
    try:
        spread = data.get("spread_pct")
        return NoiseRecord(chart=str(data["chart"]), name=str(data["name"]),
                           spread_pct=None if spread is None else float(spread),
                           spread_abs=float(data["spread_abs"]), runs=int(data["runs"]), step=str(data.get("step", "")),
                           plan=str(data["plan"]), date=str(data.get("date", "")),
                           step_index=None if data.get("step_index") is None else int(data["step_index"]),
                           runs_spread_pct=None if data.get("runs_spread_pct") is None
                           else float(data["runs_spread_pct"]))
    except (KeyError, TypeError, ValueError) as error:
        raise CompareError(f"{where}: not a noise record ({type(error).__name__}: {error}); rewrite it with "
                           "benchmarks/noise_floor.py") from None


def from_dict(data: Any, source: str = "") -> NoiseFloor:
    """A noise floor from its JSON form; a malformed file is refused in one line."""
    if not isinstance(data, dict) or not isinstance(data.get("figures", {}), dict):
        raise CompareError(f"{source or 'noise floor'}: expected a mapping with a `figures` mapping")
    records = {k: _record(v, f"{source or 'noise floor'}: figures.{k}") for k, v in data.get("figures", {}).items()}
    unmeasured = data.get("unmeasured") if isinstance(data.get("unmeasured"), dict) else {}
    return NoiseFloor(records=records, plan=str(data.get("plan", "")), plan_digest=str(data.get("plan_digest", "")),
                      runs=int(data.get("runs") or 0), date=str(data.get("date", "")),
                      machine=str(data.get("machine", "")), command=str(data.get("command", "")),
                      note=str(data.get("note", "")), source=source,
                      unmeasured={str(k): str(v) for k, v in unmeasured.items()},
                      steps=_step_records(data.get("steps", {}), f"{source or 'noise floor'}: steps"))


def floors_from_dict(data: Any, source: str = "") -> NoiseFloors:
    """Every plan's floor from the file's JSON form (one floor per plan under `floors`, or a single floor as the
    file held before); a malformed file is refused in one line."""
    if isinstance(data, dict) and "floors" in data:
        per_plan = data["floors"]
        if not isinstance(per_plan, dict):
            raise CompareError(f"{source or 'noise floor'}: `floors` must map each plan to its floor")
        found = {str(p): from_dict(f, f"{source or 'noise floor'}: floors.{p}") for p, f in per_plan.items()}
        return NoiseFloors({p: replace(f, source=source) for p, f in found.items()}, source)
    single = from_dict(data, source)
    return NoiseFloors({single.plan: single} if single.records else {}, source)


def load(path: Path | str | None = None) -> NoiseFloors:
    """The noise floors of `path`, else of $LOADTEST_NOISE_FLOOR, else the package's; a missing package file is
    no floor, a named file that cannot be read is one line."""
    named = path if path is not None else os.environ.get(NOISE_FLOOR_ENV) or None
    target = Path(named) if named else NOISE_FLOOR_FILE
    try:
        text = read_text(target, "noise floor")
    except FileNotFoundError:
        if named:
            raise CompareError(f"noise floor {target}: no such file") from None
        return NoiseFloors(source=str(target))
    except OSError as error:
        raise CompareError(f"noise floor {target}: cannot read it ({error.strerror or error})") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise CompareError(f"noise floor {target}: not JSON ({error})") from None
    return floors_from_dict(data, _shown(target))


def _shown(path: Path) -> str:
    """The package file by its path in the project; another file as named."""
    return "loadtests/data/noise_floor.json" if path.resolve() == NOISE_FLOOR_FILE else str(path)


def spreads(side: Side) -> dict[Key, list[StepSpread]]:
    """Every compared figure's spread at every step across the side's runs."""
    found, _ = readings(side)
    steps = {s.index: s for s in side.steps}
    return {key: [StepSpread(i, steps[i].name, steps[i].nodes, tuple(v for v, _ in got),
                             bound=next((b for _, b in got if b), ""), bounds=sum(bool(b) for _, b in got))
                  for i, got in sorted(per_step.items()) if i in steps]
            for key, per_step in found.items()}


def _unmeasured_reason(found: list[StepSpread]) -> str:
    if found and all(s.bounded for s in found):
        return "only a histogram bound in a run at every step"
    return f"fewer than {stats.MIN_SAMPLES} runs with a value at every step"


def measure(side: Side, date: str, machine: str = "", command: str = "", note: str = "") -> NoiseFloor:
    """The noise floor of a side's runs (runs of one plan): per figure, its largest spread over the measured
    steps."""
    plan = str(side.first.plan.get("name", "")) if isinstance(side.first.plan, dict) else ""
    records, unmeasured, steps = {}, {}, {}
    for key, found in spreads(side).items():
        measured = [s for s in found if s.measured]
        if not measured:
            unmeasured[key_text(key)] = _unmeasured_reason(found)
            continue
        per_step = {s.step_index: _spread_record(key, s, plan, date) for s in measured}
        widest = max(per_step.values(), key=lambda r: (math.inf if r.spread_pct is None else r.spread_pct,
                                                       r.spread_abs))
        records[key_text(key)] = replace(widest, step_index=None,
                                         spread_abs=max(r.spread_abs for r in per_step.values()))
        steps[key_text(key)] = per_step
    return NoiseFloor(records=records, plan=plan, plan_digest=side.plan_digest, runs=side.n, date=date,
                      machine=machine, command=command, note=note or f"measured by benchmarks/noise_floor.py: "
                      f"{side.n} runs of plan {plan}; see benchmarks/results/noise_floor_{plan}.md",
                      unmeasured=unmeasured, steps=steps)


def _spread_record(key: Key, spread: StepSpread, plan: str, date: str) -> NoiseRecord:
    """A figure's noise at one step: how far above a first run a second may be (stats.prediction_ratio of the
    noise runs' values), or, where a run gave 0 (no ratio), their range."""
    runs_pct = spread.spread_pct
    rise = None if min(spread.values) <= 0 else (stats.prediction_ratio(spread.values) - 1) * 100
    return NoiseRecord(chart=key[0], name=key[1], spread_pct=None if rise is None else round(rise, 3),
                       spread_abs=round(spread.spread_abs, 9), runs=len(spread.values), step=spread.step_name,
                       plan=plan, date=date, step_index=spread.step_index,
                       runs_spread_pct=None if math.isinf(runs_pct) else round(runs_pct, 3))

