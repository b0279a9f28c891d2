"""The plan's PromQL checks as verdicts, judged like the SLOs from recorded results (results/promql.py) and the
thresholds of the plan the run recorded (config/promql.py): never stored, as the SLO verdicts are not.

A threshold check passes when its value is within `max`/`min`; one with no value (no series, several it was not
told how to combine, Prometheus's error) is "not measured", neither passed nor failed, as an SLO without samples.
An alert-profile check holds while its expression gives nothing; when it gives anything it fails at severity
error or critical and is shown, failing nothing, at warning or info (as kube-burner judges its alerts)."""

from __future__ import annotations

from dataclasses import dataclass

from loadtests.analysis.formats import number
from loadtests.config.promql import FAILING_SEVERITIES, PromQuery
from loadtests.results import RunResult, StepResult
from loadtests.results.promql import NOT_FIRED, PromFigure


@dataclass(frozen=True)
class CheckVerdict:
    """One PromQL check of one step: `passed` None where it is not measured (or an alert that only warns)."""

    check: str  # its name
    query: str  # as sent
    passed: bool | None
    value: str  # the value in words, or why there is none
    threshold: str  # "<= 0", ">= 1 and <= 5", "no series (alert, error)"
    reason: str = ""


def plan_queries(run: RunResult, key: str) -> list[PromQuery]:
    """The figures or checks (key) of the plan the run recorded."""
    found = run.plan.get(key) if isinstance(run.plan, dict) else None
    return [PromQuery(**entry) for entry in found or [] if isinstance(entry, dict)]


def plan_checks(run: RunResult) -> list[PromQuery]:
    return plan_queries(run, "checks")


def _threshold(check: PromQuery) -> str:
    if check.alert:
        return f"no series (alert, {check.severity})"
    parts = ([f">= {check.min:g}"] if check.min is not None else []) + (
        [f"<= {check.max:g}"] if check.max is not None else [])
    return " and ".join(parts)


def judge(check: PromQuery, found: PromFigure | None) -> CheckVerdict:
    if found is None:
        return CheckVerdict(check.name, check.query, None, "not measured", _threshold(check),
                            "not measured in this step")
    value = number(found.value) if found.value is not None else found.error or "not measured"
    if check.alert:
        if found.value is None:
            fine = found.error == NOT_FIRED
            return CheckVerdict(check.name, found.query, True if fine else None, value, _threshold(check),
                                "" if fine else f"not measured: {found.error}")
        failing = check.severity in FAILING_SEVERITIES
        return CheckVerdict(check.name, found.query, False if failing else None, f"fired ({value})",
                            _threshold(check), "" if failing else f"fired at {check.severity}: fails nothing")
    if found.value is None:
        return CheckVerdict(check.name, found.query, None, value, _threshold(check), f"not measured: {value}")
    held = ((check.max is None or found.value <= check.max) and (check.min is None or found.value >= check.min))
    return CheckVerdict(check.name, found.query, held, value, _threshold(check))


def verdicts(step: StepResult, checks: list[PromQuery]) -> list[CheckVerdict]:
    """Every check of the plan on one step (none where the step recorded no PromQL: a step before Prometheus)."""
    recorded = {f.name: f for f in step.promql if f.kind == "check"}
    if not recorded and step.promql_window is None:
        return []
    return [judge(check, recorded.get(check.name)) for check in checks]


def run_verdicts(run: RunResult) -> list[tuple[StepResult, CheckVerdict]]:
    checks = plan_checks(run)
    return [(step, verdict) for step in run.steps for verdict in verdicts(step, checks)]

