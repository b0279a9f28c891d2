"""A lesson's verdict: what each variant measured here, the effect against what the field report said, and one
verdict for the lesson; what lesson.html and lesson.json hold.

The runs are read by lesson_runs.py (each of the lesson's figures from the last measured step of every run;
growth lessons: from every step, the way query.py reads a step), and each figure of the warned setup against
each fix is weighed by the judge (judge.py: the effect, the runs' separation or rank test, the words). The
effect is the ratio of the warned setup's median to the fix's (inverted for `expect: lower`), so above 1 means
the direction the field report describes; a growth lesson's is the last step's value over the first's. A verdict
rests only on measured noise, so it needs at least MIN_RUNS runs of every variant (one run shows the effect and
says "single run": no verdict); it is read from the deciding figure (the lesson's first that is not a `check`: a
sanity check that is zero by construction in one variant cannot go either way):

- reproduced: every run of one setup lies beyond every run of the other in the direction the report describes,
  or a Mann-Whitney test finds them different at judge.ALPHA (0.05) where the runs allow it;
- not reproduced: they separate the other way, or they overlap within a range (the pooled runs' largest over
  smallest value) that an effect of the size the report implies (`min_effect`) would have cleared;
- inconclusive: they overlap over a range too wide to tell, or a histogram bound hides the values;
- incomplete: a variant aborted, recorded nothing or never ran: no verdict rests on it.

The headline sets the effect measured beside the report's claim (claim_of: the pair of figures it quoted, else
the least effect it implies, `min_effect`), and where the runs separate with an effect far smaller than that
claim (judge.far_smaller) it says "separated, far smaller than claimed" rather than "reproduced": the verdict
stays reproduced, the headline does not read the same for ×1.08 and ×7.6.

A growth lesson judges the shape (the quadratic term of value = a + b·n + c·n² over every run: linear per node
when its 95 % interval holds 0) and the magnitude (the per-node slope against the report's figure over its
nodes) apart."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loadtests.analysis import formats, stats
from loadtests.analysis.formats import times
from loadtests.analysis.judge import (
    MIN_RUNS,
    SINGLE_RUN,
    TOO_FEW_RUNS,
    UNJUDGED,
    Claim,
    Comparison,
    compare_variants,
    side_bound,
)
from loadtests.analysis.lesson_runs import VariantRuns, feature_states, recorded
from loadtests.config.lesson import Lesson, Measure

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")


def claim_of(lesson: Lesson, measure: Measure) -> Claim:
    """What the field report claimed of this measure, oriented as the measured effect: the ratio of the pair of
    figures it quoted for it, else the least effect it implies (the measure's `min_effect`)."""
    figure = lesson.field_report.figure
    quoted = lesson.field_report.ratio
    if quoted is not None and str(figure.get("measure") or lesson.deciding.name) == measure.name:
        effect = 1 / quoted if measure.expect == "lower" else quoted
        return Claim(effect, f"the report saw ×{effect:.3g}")
    return Claim(measure.min_effect, f"the report implies at least ×{measure.min_effect:.3g}")


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


def growth_shape(points: list[tuple[int, list[float]]]) -> tuple[float | None, tuple[float, float] | None, str]:
    """Whether the value grows by a fixed amount per node: the quadratic term c of value = a + b·n + c·n²
    fitted over every run's value, its 95 % interval, and the shape that shows (linear per node when the interval
    holds 0). A shape needs MIN_RUNS runs at every step, so that the scatter about the fit is the runs' noise."""
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
    t = stats.t_quantile(0.975, dof)
    curvature = float(coef[2]) / scale**2
    low, high = (float(coef[2]) - t * spread) / scale**2, (float(coef[2]) + t * spread) / scale**2
    shape = "linear per node" if low <= 0 <= high else "super-linear" if low > 0 else "sub-linear"
    return curvature, (low, high), shape


def growth(measure: Measure, runs: VariantRuns, lesson: Lesson) -> tuple[Growth, Comparison]:
    """The sweep's growth of one measure; its comparison is the last step's runs against the first step's."""
    claim = lesson.field_report.figure
    from loadtests.analysis.projection import NOT_PROJECTABLE, fit

    per_step = runs.per_step(measure)
    points = [(nodes, statistics.median(values)) for nodes, values in per_step]
    found = Growth(measure.name, measure.unit, points, None)
    xs = [float(n) for n, values in per_step for _ in values]
    ys = [v for _, values in per_step for v in values]
    if len({*xs}) >= 2:
        found.per_node, found.per_node_ci = stats.slope_interval(xs, ys)
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
    return found, compare_variants(measure, last, first, against, claim=claim_of(lesson, measure))


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
                         + f": {c.headline}" for c in deciding)  # the effect beside the report's claim
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
            found, comparison = growth(measure, sweep, lesson)
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
                    comparisons.append(compare_variants(measure, values[ours], values[fix], fix, bounds[ours],
                                                        bounds[fix], why_missing="; ".join(missing),
                                                        claim=claim_of(lesson, measure)))
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
                      "state": runs.state, "recorded": recorded(runs),
                      "features": feature_states(runs, lesson.features),
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
