"""A step's PromQL figures and checks for the report (results/promql.py): each value in its unit, a check's
verdict and what it needed, the query as sent, and beside them the part of the window Prometheus's scrapes
cover."""

from __future__ import annotations

from dataclasses import dataclass

from loadtests.analysis.formats import in_unit
from loadtests.analysis.promql import judge
from loadtests.config.promql import PromQuery
from loadtests.results import StepResult


@dataclass(frozen=True)
class PromqlRow:
    name: str
    kind: str  # "figure" | "check"
    value: str  # in its unit, or why there is none
    verdict: str  # a check's: "held", "failed", "not measured"; "" for a figure
    css: str
    needed: str
    query: str


@dataclass(frozen=True)
class PromqlView:
    window: str
    rows: list[PromqlRow]


VERDICTS = {True: ("held", "pass"), False: ("failed", "fail"), None: ("not measured", "skip")}


def promql_view(step: StepResult, figures: list[PromQuery], checks: list[PromQuery]) -> PromqlView | None:
    """The step's table, None where the run had no Prometheus."""
    if step.promql_window is None:
        return None
    units = {q.name: q.unit for q in figures}
    by_check = {q.name: q for q in checks}
    rows = []
    for found in step.promql:
        value = in_unit(found.value, units.get(found.name, "")) if found.value is not None else found.error
        check = by_check.get(found.name) if found.kind == "check" else None
        if check is None:
            rows.append(PromqlRow(found.name, found.kind, value, "", "", "", found.query))
            continue
        verdict = judge(check, found)
        text, css = VERDICTS[verdict.passed]
        rows.append(PromqlRow(found.name, found.kind, verdict.value, text, css, verdict.threshold, found.query))
    return PromqlView(step.promql_window.said(), rows)
