"""The page of a lesson: what the field report said, what each variant measured here, the effect and a verdict.

Each of the lesson's figures is read from the last measured step of every run (growth lessons: from every
step) in one of three ways the lesson declares:

- figure: a path into the step's results, e.g. `etcd.wal_fsync_p99_s`, `pod_startup.p99`,
  `etcd.keys_by_prefix.events`, `processes[component=kube-apiserver].cpu_percent` (summed over matches),
  `requests_by_code[5*]` (keys matching a pattern, summed), `etcd.alarms` (a list: its length);
- scrape: a metric of the /metrics pages kept at the window's start and end ({page: apiserver | etcd,
  metric, labels (a value or a list of values), stat: delta | rate | p50 | p90 | p99 | sum | sum_rate | end});
- audit: requests of the step's audit log ({verb, resource, client (a prefix), code (a prefix),
  stat: count | rate}).

The effect is the ratio of the warned setup's value to the fix's (inverted for `expect: lower`), so above 1
means the direction the field report describes; a growth lesson's is the last step's value over the first's.
The verdict weighs it against the noise: the spread of repeated runs when there are any (benchstat's largest
distance from the median), else the lesson's declared noise of that figure:

- reproduced: the effect stands out of the noise (and with repeats, every warned value lies beyond every fix
  value);
- not reproduced: the opposite effect stands out of the noise, or the effect is within a noise band narrow
  enough that an effect of the size the report implies (`min_effect`) would have stood out;
- inconclusive: within a noise band too wide to tell.
"""

from __future__ import annotations

import fnmatch
import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loadtests import results
from loadtests.lesson import Lesson, Measure, Variant
from loadtests.measure.prometheus import Snapshot, counter_delta, histogram_delta
from loadtests.measure.scrapes import load_scrape, step_folder
from loadtests.report import charts, page, stats
from loadtests.report.samples import repeat_folders
from loadtests.results import RESULTS_FILE, RunResult, StepResult

LESSON_PAGE = "lesson.html"
LESSON_RESULTS = "lesson.json"
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")
QUANTILES = ("p50", "p90", "p99")

# a value, and "<" or ">" where it is only a histogram's bound (its rank in the first or the open last bucket)
Reading = tuple[float | None, str]


# ---- reading a figure from a step ---------------------------------------------------------------------------


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
    """figure_value, and the bound the results recorded where the path ends in a quantile of one histogram."""
    *parent, last = path.split(".")
    holders = _walk(step, parent) if parent and last in QUANTILES else []
    bound = _walk(holders[0], ["bounds", last]) if len(holders) == 1 else []
    return figure_value(step, path), str(bound[0]) if bound else ""


def _one_of(values: list[Any]) -> Any:
    allowed = frozenset(str(v) for v in values)
    return lambda value: value in allowed


def _matcher(labels: dict[str, Any]) -> dict[str, Any]:
    """Label matchers: a value, or a list of values any of which matches."""
    return {k: _one_of(want) if isinstance(want, list) else str(want) for k, want in (labels or {}).items()}


def scrape_reading(step: StepResult, folder: Path, spec: dict[str, Any]) -> Reading:
    """A metric over the step's window, from the /metrics pages kept with it."""
    source, metric, stat = spec.get("page", "apiserver"), spec["metric"], spec.get("stat", "delta")
    start = load_scrape(folder, source, "start", every_family=True)
    end = load_scrape(folder, source, "end", every_family=True)
    if end is None:
        return None, ""
    match = _matcher(spec.get("labels") or {})
    window = step.duration_s or None
    if stat == "end":
        return end.total(metric, **match), ""
    if stat in ("delta", "rate"):
        # a labelled counter appears with its first increment: absent from a kept page means none happened
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
    """Requests of the step's audit log matching verb, resource, client and code prefixes."""
    if not step.audit.source:
        return None
    count = 0
    for row in step.audit.requests:
        if spec.get("verb") and row.verb != spec["verb"]:
            continue
        if spec.get("resource") and row.resource != spec["resource"]:
            continue
        if spec.get("client") and not row.client.startswith(spec["client"]):
            continue
        code = spec.get("code")
        count += sum(n for c, n in row.codes.items() if c.startswith(str(code))) if code else row.count
    if spec.get("stat", "count") == "rate":
        return count / step.duration_s if step.duration_s else None
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


# ---- runs of a variant ----------------------------------------------------------------------------------------


@dataclass
class VariantRuns:
    """A variant's runs (one, or its repeats), with what each recorded."""

    variant: Variant
    folder: Path
    runs: list[tuple[RunResult, Path]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # run folders that recorded nothing

    @staticmethod
    def load(variant: Variant, folder: Path) -> VariantRuns:
        found = VariantRuns(variant, folder)
        for run_folder in repeat_folders(folder) or [folder]:
            try:
                found.runs.append((results.load(run_folder), run_folder))
            except (OSError, ValueError):
                found.missing.append(str(run_folder))
        return found

    def measured_steps(self) -> list[tuple[list[StepResult], Path]]:
        return [([s for s in run.steps if s.status == "measured"], path) for run, path in self.runs]

    def last_readings(self, measure: Measure) -> list[tuple[float, str]]:
        """The measure at the last measured step of every run (runs where it was not measured left out)."""
        found = []
        for steps, path in self.measured_steps():
            if steps:
                value, bound = reading(measure, steps[-1], step_folder(path, steps[-1].index))
                if value is not None and math.isfinite(value):
                    found.append((value, bound))
        return found

    def per_step(self, measure: Measure) -> list[tuple[int, float]]:
        """(nodes, median over the runs) at every measured step."""
        by_nodes: dict[int, list[float]] = {}
        for steps, path in self.measured_steps():
            for step in steps:
                value = read(measure, step, step_folder(path, step.index))
                if value is not None and math.isfinite(value):
                    by_nodes.setdefault(step.nodes, []).append(value)
        return [(nodes, statistics.median(v)) for nodes, v in sorted(by_nodes.items())]


# ---- effects and verdicts -------------------------------------------------------------------------------------


def ratio(warned: float, fix: float) -> float:
    """warned / fix, with a zero side made explicit: ∞ when only the fix is zero, 1 when both are."""
    if fix == 0:
        return 1.0 if warned == 0 else math.inf
    if warned == 0:
        return 0.0
    return warned / fix


def times(effect: float | None) -> str:
    """An effect as a factor: ×2.41, ×∞ (only the fix measured zero), — (not measured)."""
    if effect is None:
        return "—"
    return "×∞" if math.isinf(effect) else f"×{effect:.2f}"


def bias(measure: Measure, warned_bound: str, fix_bound: str) -> str:
    """Which way histogram bounds can move the oriented effect: a "<" value may be smaller than shown, a ">"
    one larger; "overstated", "understated", "unknown" (both ways), or "" (no bound)."""
    over_side, under_side = (fix_bound, warned_bound) if measure.expect == "lower" else (warned_bound, fix_bound)
    over = over_side == "<" or under_side == ">"
    under = over_side == ">" or under_side == "<"
    return "unknown" if over and under else "overstated" if over else "understated" if under else ""


def judge(effect: float, noise: float, min_effect: float, separated: bool, bounded: str = "") -> tuple[str, str]:
    """The verdict on an oriented effect (above 1: the direction the report describes) and why; `bounded`
    (see bias) keeps a verdict from resting on a histogram bound that may hide the real values."""
    band = 1.0 + noise
    shown = times(effect)
    if bounded == "unknown":
        return "inconclusive", f"{shown}, but both values are only histogram bounds: its buckets cannot tell them apart"
    if effect > band and bounded == "overstated":
        return "inconclusive", f"{shown}, but a histogram bound may overstate it: the real effect may be smaller"
    if effect > band and separated:
        return "reproduced", f"{shown} stands out of the noise (±{noise:.0%})"
    if effect > band:
        return "inconclusive", f"{shown}, but the repeats of the two setups overlap"
    if effect < 1 / band and bounded == "understated":
        return "inconclusive", f"{shown}, but a histogram bound may understate it: the real effect may be larger"
    if effect < 1 / band:
        return "not reproduced", f"the opposite: {shown} against the expected direction (noise ±{noise:.0%})"
    if bounded:
        return "inconclusive", f"{shown} is within the noise (±{noise:.0%}), and one value is only a histogram bound"
    if min_effect > band:
        return "not reproduced", (f"{shown} is within the noise (±{noise:.0%}), where an effect of "
                                  f"×{min_effect:g} would have stood out")
    return "inconclusive", f"{shown} is within the noise (±{noise:.0%}), too wide to tell a ×{min_effect:g} effect"


@dataclass
class Comparison:
    """One measure, the warned setup against one fix (or a growth's last step against its first)."""

    measure: str
    against: str  # the fix variant, or "first step"
    warned: list[float]
    fix: list[float]
    effect: float | None
    noise: float
    noise_from: str
    verdict: str
    reason: str
    unit: str
    warned_bound: str = ""  # "<" or ">" where every warned value is only a histogram bound
    fix_bound: str = ""


def side_bound(readings: list[tuple[float, str]]) -> str:
    """The bound every reading of one side shares, else "" (a median of bounds is a bound too)."""
    found = {bound for _, bound in readings}
    return found.pop() if len(found) == 1 else ""


def _oriented(measure: Measure, warned: float, fix: float) -> float:
    return ratio(fix, warned) if measure.expect == "lower" else ratio(warned, fix)


def compare(measure: Measure, warned: list[float], fix: list[float], against: str, warned_bound: str = "",
            fix_bound: str = "") -> Comparison:
    if not warned or not fix:
        return Comparison(measure.name, against, warned, fix, None, measure.noise, "declared", "not measured",
                          "no value on " + ("either side" if not warned and not fix else
                                            "the warned side" if not warned else f"{against}"), measure.unit)
    effect = _oriented(measure, statistics.median(warned), statistics.median(fix))
    repeated = len(warned) > 1 and len(fix) > 1
    observed = max(stats.summarize(warned).spread_pct, stats.summarize(fix).spread_pct) / 100
    # two or three values per side understate the spread: the declared noise stays a floor until there are more
    noise = observed if min(len(warned), len(fix)) >= 4 else max(observed, measure.noise)
    noise_from = (f"repeats (n={min(len(warned), len(fix))})" if repeated and noise == observed
                  else "declared" if not repeated else f"declared (repeats n={min(len(warned), len(fix))} spread "
                  f"±{observed:.0%})")
    if repeated:
        low, high = (min(warned), max(fix)) if measure.expect != "lower" else (min(fix), max(warned))
        separated = low > high
    else:
        separated = True
    verdict, reason = judge(effect, noise, measure.min_effect, separated, bias(measure, warned_bound, fix_bound))
    return Comparison(measure.name, against, warned, fix, effect, noise, noise_from, verdict, reason, measure.unit,
                      warned_bound, fix_bound)


@dataclass
class Growth:
    """A measure across the steps of a sweep: per node, fitted, and projected to the field report's scale."""

    measure: str
    unit: str
    points: list[tuple[int, float]]
    per_node: float | None  # slope of a least-squares line, in the measure's unit per node
    projected: float | None = None  # at the field report's scale, from the projection fit
    band: tuple[float, float] | None = None
    fit: str = ""


def growth(measure: Measure, runs: VariantRuns, at_nodes: int | None) -> tuple[Growth, Comparison]:
    from loadtests.report.projection import fit

    points = runs.per_step(measure)
    slope = None
    if len(points) >= 2:
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
        denominator = sum((x - mean_x) ** 2 for x in xs)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / denominator
    found = Growth(measure.name, measure.unit, points, slope)
    fitted = fit([p[0] for p in points], [p[1] for p in points]) if len(points) >= 3 else None
    if fitted is not None and at_nodes:
        found.projected = float(fitted.predict([at_nodes])[0])
        low, high = fitted.interval([at_nodes])
        found.band = (max(0.0, float(low[0])), float(high[0]))  # every measure here is a size, time or count
        found.fit = fitted.describe(measure.unit)
    first = [points[0][1]] if points else []
    last = [points[-1][1]] if len(points) > 1 else []
    against = f"first step ({points[0][0]:,} nodes)" if points else "first step"
    return found, compare(measure, last, first, against)


# ---- the page -------------------------------------------------------------------------------------------------


def _feature_states(runs: VariantRuns, features: list[str]) -> dict[str, str]:
    """Each feature gate's state in the variant's first run, from its kept apiserver page."""
    states: dict[str, str] = {}
    for steps, path in runs.measured_steps()[:1]:
        if not steps:
            continue
        end: Snapshot | None = load_scrape(step_folder(path, steps[-1].index), "apiserver", "end", every_family=True)
        for feature in features:
            value = end.total("kubernetes_feature_enabled", name=feature) if end is not None else None
            states[feature] = "not listed" if value is None else "enabled" if value else "disabled"
    return states


def _recorded(runs: VariantRuns) -> list[str]:
    """What the variant's runs recorded beyond the figures: errors, alarms, refused writes, notes."""
    lines = []
    for run, path in runs.runs:
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


def _bar_panel(index: int, measure: Measure, by_variant: dict[str, list[float]]) -> charts.Panel:
    factor, label, hover = charts.DISPLAY.get(measure.unit, (1.0, measure.unit, "%{y:,.3g}"))
    names = list(by_variant)
    medians = [statistics.median(v) * factor if v else None for v in by_variant.values()]
    plus = [(max(v) - statistics.median(v)) * factor if v else 0 for v in by_variant.values()]
    minus = [(statistics.median(v) - min(v)) * factor if v else 0 for v in by_variant.values()]
    palette = charts.colours(names)
    trace = {"type": "bar", "x": names, "y": medians, "marker": {"color": [palette[n] for n in names]},
             "hovertemplate": hover + "<extra></extra>",
             "error_y": {"type": "data", "array": plus, "arrayminus": minus, "visible": any(plus) or any(minus)}}
    layout = {"margin": {"l": 60, "r": 10, "t": 10, "b": 40}, "height": 260, "showlegend": False,
              "yaxis": {"title": {"text": label}, "rangemode": "tozero"}, "font": {"family": charts.FONT, "size": 12}}
    return charts.Panel(f"lesson-{index}", measure.name, measure.source,
                        {"data": [trace], "layout": layout, "config": {"displaylogo": False, "responsive": True}})


def _growth_panel(index: int, found: Growth) -> charts.Panel:
    factor, label, hover = charts.DISPLAY.get(found.unit, (1.0, found.unit, "%{y:,.3g}"))
    trace = {"type": "scatter", "mode": "lines+markers", "x": [p[0] for p in found.points],
             "y": [p[1] * factor for p in found.points], "hovertemplate": "%{x:,} nodes: " + hover + "<extra></extra>"}
    layout = {"margin": {"l": 60, "r": 10, "t": 10, "b": 40}, "height": 260, "showlegend": False,
              "xaxis": {"title": {"text": "nodes"}}, "yaxis": {"title": {"text": label}, "rangemode": "tozero"},
              "font": {"family": charts.FONT, "size": 12}}
    return charts.Panel(f"lesson-{index}", found.measure, "measured at each step",
                        {"data": [trace], "layout": layout, "config": {"displaylogo": False, "responsive": True}})


def lesson_verdict(comparisons: list[Comparison]) -> str:
    """The lesson's verdict: its first measure's, over every fix (all must agree to call it reproduced)."""
    first = [c for c in comparisons if c.measure == comparisons[0].measure] if comparisons else []
    found = {c.verdict for c in first}
    if not found or found == {"not measured"}:
        return "not measured"
    if found == {"reproduced"}:
        return "reproduced"
    if "not reproduced" in found and "reproduced" not in found:
        return "not reproduced"
    return "inconclusive"


def evaluate(lesson: Lesson, folder: Path) -> dict[str, Any]:
    """Every variant's runs read, every measure compared; what lesson.html and lesson.json hold."""
    variants = {v.name: VariantRuns.load(v, folder / v.name) for v in lesson.variants}
    comparisons: list[Comparison] = []
    growths: list[Growth] = []
    panels: list[charts.Panel] = []
    if lesson.growth:
        sweep = next(iter(variants.values()))
        at_nodes = int(lesson.field_report.figure.get("nodes") or 0) or None
        for i, measure in enumerate(lesson.measures):
            found, comparison = growth(measure, sweep, at_nodes)
            growths.append(found)
            comparisons.append(comparison)
            if found.points:
                panels.append(_growth_panel(i, found))
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
                    comparisons.append(compare(measure, values[ours], values[fix], fix, bounds[ours], bounds[fix]))
            if any(values.values()):
                panels.append(_bar_panel(i, measure, values))
    first_run = next((run for runs in variants.values() for run, _ in runs.runs), None)
    return {
        "lesson": lesson,
        "verdict": lesson_verdict(comparisons),
        "comparisons": comparisons,
        "growths": growths,
        "variants": [{"variant": runs.variant, "runs": runs.runs, "missing": runs.missing,
                      "recorded": _recorded(runs), "features": _feature_states(runs, lesson.features),
                      "reports": [str((path / "report.html").relative_to(folder)) for _, path in runs.runs
                                  if (path / "report.html").is_file()]}
                     for runs in variants.values()],
        "kube_version": (first_run.environment.get("versions", {}).get("kube-apiserver")
                         or (first_run.plan.get("target") or {}).get("kube_version")) if first_run else "—",
        "scale": " → ".join(f"{s.nodes:,}" for s in first_run.steps) + " nodes" if first_run else "—",
        "panels": panels,
    }


def summary(evaluated: dict[str, Any]) -> dict[str, Any]:
    """lesson.json: the verdict and every comparison, for tables and scripts."""
    lesson: Lesson = evaluated["lesson"]
    return {
        "lesson": lesson.name, "title": lesson.title, "verdict": evaluated["verdict"],
        "kube_version": evaluated["kube_version"], "scale": evaluated["scale"],
        "comparisons": [{**asdict(c), "effect": None if c.effect is None or math.isinf(c.effect) else c.effect,
                         "effect_infinite": c.effect is not None and math.isinf(c.effect)}
                        for c in evaluated["comparisons"]],
        "growths": [asdict(g) for g in evaluated["growths"]],
        "recorded": {v["variant"].name: v["recorded"] for v in evaluated["variants"]},
    }


def write_lesson_page(lesson: Lesson, folder: Path) -> Path:
    """Write folder/lesson.html (self-contained) and folder/lesson.json; return the page's path."""
    evaluated = evaluate(lesson, folder)
    (folder / LESSON_RESULTS).write_text(json.dumps(summary(evaluated), indent=1, default=str))
    html = page.render("lesson.html", folder=folder.name, effect_text=lambda c: times(c.effect),
                       results_file=RESULTS_FILE, figures=charts.payload(evaluated["panels"]), **evaluated)
    return page.write(folder / LESSON_PAGE, html)


def _cell(values: list[float], unit: str, bound: str = "") -> str:
    return f"{bound} {page.in_unit(statistics.median(values), unit)}".lstrip() if values else "—"


def lessons_table(folders: list[Path]) -> str:
    """A markdown table of lessons' verdicts and first figures (lessons.md beside them, and the README)."""
    rows = ["| lesson | verdict | figure | warned (sweep: last step) | against | effect |", "|---|---|---|---|---|---|"]
    for folder in folders:
        data = json.loads((folder / LESSON_RESULTS).read_text())
        comparisons = data["comparisons"]
        first = [c for c in comparisons if c["measure"] == comparisons[0]["measure"]]
        for i, c in enumerate(first):
            effect = "×∞" if c["effect_infinite"] else times(c["effect"])
            fix = f"{c['against']}: {_cell(c['fix'], c['unit'], c.get('fix_bound', ''))}"
            name, verdict = (f"`{data['lesson']}`", f"**{data['verdict']}**") if i == 0 else ("", "")
            rows.append(f"| {name} | {verdict} | {c['measure'] if i == 0 else ''} | "
                        f"{_cell(c['warned'], c['unit'], c.get('warned_bound', ''))} | {fix} | {effect} |")
    return "\n".join(rows) + "\n"
