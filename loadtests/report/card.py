"""A run report's comparison card: what the page's own comparison with a dropped second report needs.

The card is what the page's own comparison with a dropped second report needs, computed here by the
code `loadtest compare` uses: per figure and step, the value as an interval (a histogram bound is a range), its
text, and the cut-offs a candidate must pass against it (rules.cutoffs: the rules' threshold, the recorded
noise either way). The page's script only sets the other report's intervals against these numbers; its overlay
traces are drawn here too, styled as compare draws side B.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from markupsafe import Markup

from loadtests.analysis import figures, noise, stats
from loadtests.analysis.formats import in_unit
from loadtests.analysis.judge import NOT_NOISE_CHECKED, interval
from loadtests.analysis.noise import Noise, NoiseFloor, NoiseFloors
from loadtests.analysis.rules import cutoffs, limits_from, rule_text
from loadtests.analysis.samples import Reading, Side, readings
from loadtests.report import charts, page
from loadtests.report.redact import redact
from loadtests.results import RunResult

CARD_ID = "loadtest-compare-card"
CARD_FORMAT = 1


def _number(value: float | None) -> float | str | None:
    """JSON has no infinity: an open histogram bucket's upper end travels as "inf"."""
    if value is None or not math.isinf(value):
        return value
    return "inf" if value > 0 else "-inf"


def _card_step(got: list[Reading], unit: str, rule: str, limits: dict[str, float],
               noise_at: tuple[Noise | None, str]) -> dict[str, Any]:
    """One step of a figure on the card: its value, interval and cut-offs, weighed against that step's noise."""
    record, missing = noise_at
    low, high = interval(got)
    cut = cutoffs(rule, low, high, limits, record)
    value = stats.summarize([v for v, _ in got]).median
    bound = next((b for _, b in got if b), "")
    return {"value": value, "text": f"{bound} {in_unit(value, unit)}".lstrip(), "low": _number(low),
            "high": _number(high), "bound": bound, "regress_above": _number(cut.regress_above),
            "noise_above": _number(cut.noise_above), "noise_below": _number(cut.noise_below),
            "floor": record.text if record is not None else "", "floor_missing": missing or ""}


def card(run: RunResult, floor: NoiseFloors | NoiseFloor | None = None) -> Markup:
    """The comparison card of one run, as the baseline (its cut-offs) or the candidate (its intervals)."""
    floors = noise.as_floors(floor if floor is not None else noise.load())
    plan = run.plan if isinstance(run.plan, dict) else {}
    thresholds = plan.get("compare") or {}
    limits = limits_from(thresholds)
    plan_name = str(plan.get("name", ""))
    side = Side(label="", runs=[run], folders=[Path(run.run_id)])
    found, rules = readings(side)
    figures_out = []
    for key, per_step in found.items():
        rule = rules[key]
        if rule is None:
            continue
        unit = figures.CHARTS[key[0]].unit
        steps = {str(index): _card_step(got, unit, rule, limits,
                                        floors.lookup(key, {plan_name}, {run.plan_digest}, index))
                 for index, got in per_step.items()}
        figures_out.append({"chart": key[0], "name": key[1], "label": f"{figures.CHARTS[key[0]].short} {key[1]}",
                            "unit": unit,
                            "rule": rule, "rule_text": rule_text(rule, limits), "steps": steps})
    data = {
        "format": CARD_FORMAT, "run_id": run.run_id, "status": run.status, "error": run.error or "",
        "started_at": run.started_at, "plan_name": plan_name, "plan_digest": run.plan_digest,
        "thresholds": thresholds, "limits": limits, "not_noise_checked": NOT_NOISE_CHECKED,
        "versions": redact((run.environment or {}).get("versions") or {}),
        "steps": [{"index": s.index, "name": s.name, "nodes": s.nodes} for s in run.steps],
        "figures": figures_out, "overlay": overlay(run),
    }
    return page.script_json(_json(data))


def overlay(run: RunResult) -> dict[str, list[dict[str, Any]]]:
    """This run's traces for another report's charts, by panel id: dashed lines (hatched bars) as compare
    draws side B, the same colour per figure as the charts' own; SLO lines left out (the page has its own)."""
    if not run.steps:
        return {}
    measured = [s for s in figures.series(run) if not s.slo_line]
    nodes, labels = step_axis(run)
    return {p.id: p.figure["data"] for p in charts.run_panels(measured, nodes, labels, dashed=True)}


def step_axis(run: RunResult) -> tuple[list[int], list[str]]:
    """The steps' nodes and names, as a run's charts place them."""
    return [s.nodes for s in run.steps], [s.name or f"{s.nodes} nodes" for s in run.steps]


def _json(data: Any) -> str:
    import json

    return json.dumps(data, separators=(",", ":"), allow_nan=False, default=str)
