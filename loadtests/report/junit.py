"""JUnit XML, so CI systems show SLO verdicts and comparisons as test results without reading our JSON.

One writer (`write`) serves the run report (a suite per step, a case per SLO; a replay's step also a suite of its
fidelity targets, a case each), the report of repeated runs (the same, a case failing when its SLO failed in any
repeat) and compare (a suite per step, a case per compared figure).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from loadtests.analysis.fidelity import FidelityVerdict
from loadtests.analysis.fidelity import verdicts as fidelity_verdicts
from loadtests.analysis.promql import CheckVerdict, plan_checks
from loadtests.analysis.promql import verdicts as promql_verdicts
from loadtests.analysis.roll import RollVerdict
from loadtests.analysis.roll import verdicts as roll_verdicts
from loadtests.analysis.slo import Verdict, verdicts
from loadtests.results import RunResult

JUNIT_FILE = "junit.xml"


@dataclass
class Case:
    """One test case: failed when `failure` is set, skipped when `skipped` is set."""

    classname: str
    name: str
    failure: str | None = None
    skipped: str | None = None
    details: str = ""  # longer text inside <failure>/<system-out>
    failure_type: str = "SLO"


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    timestamp: str | None = None
    time_s: float = 0.0


def build(name: str, suites: list[Suite]) -> ET.ElementTree:
    """The XML tree, with totals on <testsuites> and on each <testsuite> as CI parsers expect."""
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for suite in suites:
        counts = {
            "tests": len(suite.cases),
            "failures": sum(c.failure is not None for c in suite.cases),
            "skipped": sum(c.failure is None and c.skipped is not None for c in suite.cases),
        }
        for key, value in counts.items():
            totals[key] += value
        element = ET.SubElement(root, "testsuite", name=suite.name, errors="0", time=f"{suite.time_s:.3f}",
                                **{k: str(v) for k, v in counts.items()})
        if suite.timestamp:
            element.set("timestamp", suite.timestamp)
        if suite.properties:
            props = ET.SubElement(element, "properties")
            for key, value in suite.properties.items():
                ET.SubElement(props, "property", name=key, value=value)
        for case in suite.cases:
            item = ET.SubElement(element, "testcase", classname=case.classname, name=case.name, time="0")
            if case.failure is not None:
                failure = ET.SubElement(item, "failure", message=case.failure, type=case.failure_type)
                failure.text = case.details or case.failure
            elif case.skipped is not None:
                ET.SubElement(item, "skipped", message=case.skipped)
            elif case.details:
                ET.SubElement(item, "system-out").text = case.details
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("errors", "0")
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return tree


def write(path: Path, name: str, suites: list[Suite]) -> Path:
    build(name, suites).write(path, encoding="utf-8", xml_declaration=True)
    return path


def _p99(v: Verdict) -> str:
    return "n/a" if v.value_s is None else f"{v.value_s:.3f} s"


def verdict_text(v: Verdict) -> str:
    """"p99 0.041 s vs threshold 1 s (700 samples, <source>)", for a case's details."""
    return f"p99 {_p99(v)} vs threshold {v.threshold_s:g} s ({v.count} samples, {v.source})"


def _roll_case(step_name: str, v: RollVerdict) -> Case:
    text = f"{v.check}: {v.value} (needed {v.threshold})"
    if v.passed is False:
        return Case(step_name, v.check, failure=text, failure_type="rolling upgrade")
    if v.passed is None:
        return Case(step_name, v.check, skipped=v.value, details=text)
    return Case(step_name, v.check, details=text)


def _fidelity_case(step_name: str, v: FidelityVerdict) -> Case:
    """A fidelity target as a case: failed when missed, skipped when not measured (as an SLO without samples)."""
    text, classname = f"{v.check}: {v.value} (target: {v.threshold})", f"{step_name}: replay fidelity: {v.group}"
    if v.passed is False:
        return Case(classname, v.check, failure=text, failure_type="replay fidelity")
    if v.passed is None:
        return Case(classname, v.check, skipped=v.reason or "not measured", details=text)
    return Case(classname, v.check, details=text)


def _promql_case(step_name: str, v: CheckVerdict) -> Case:
    """A PromQL check as a case: failed (its query in the message) when it did not hold, skipped when not
    measured (as an SLO without samples)."""
    text = f"{v.check}: {v.value} (needed {v.threshold}); query: {v.query}"
    classname = f"{step_name}: PromQL checks"
    if v.passed is False:
        return Case(classname, v.check, failure=text, failure_type="PromQL check")
    if v.passed is None:
        return Case(classname, v.check, skipped=v.reason or "not measured", details=text)
    return Case(classname, v.check, details=text)


def _verdict_case(v: Verdict) -> Case:
    value, text = _p99(v), verdict_text(v)
    if v.passed is False:
        return Case(v.step_name, v.slo, failure=f"p99 {value} > threshold {v.threshold_s:g} s", details=text)
    if v.passed is None:
        return Case(v.step_name, v.slo, skipped=v.reason or "not judged", details=text)
    return Case(v.step_name, v.slo, details=text)


def run_suites(run: RunResult) -> list[Suite]:
    """A suite per recorded step (a case per SLO), then a `run` suite whose one case fails if the run aborted."""
    by_step: dict[int, list[Verdict]] = {}
    for v in verdicts(run):
        by_step.setdefault(v.step_index, []).append(v)
    suites = [
        Suite(name=f"step {step.index}: {step.name}", cases=[_verdict_case(v) for v in by_step.get(step.index, [])],
              properties={"nodes": str(step.nodes), "pods_per_node": str(step.pods_per_node)},
              timestamp=step.started_at, time_s=step.duration_s)
        for step in run.steps
    ]
    promql = plan_checks(run)
    for step in run.steps:
        if judged := promql_verdicts(step, promql):
            suites.append(Suite(name=f"PromQL checks: step {step.index}: {step.name}",
                                cases=[_promql_case(step.name, v) for v in judged], timestamp=step.started_at))
        checks = roll_verdicts(step)
        if checks:
            suites.append(Suite(name=f"rolling upgrade: step {step.index}: {step.name}",
                                cases=[_roll_case(step.name, v) for v in checks], timestamp=step.started_at))
        targets = fidelity_verdicts(step)
        if targets:
            suites.append(Suite(name=f"replay fidelity: step {step.index}: {step.name}",
                                cases=[_fidelity_case(step.name, v) for v in targets], timestamp=step.started_at))
    suites.append(Suite(name="run", cases=[completed_case(run)],
                        properties={"run_id": run.run_id, "status": run.status}, timestamp=run.started_at))
    return suites


def completed_case(run: RunResult, classname: str = "run", name: str = "run completed") -> Case:
    """A case failing when the run aborted or never finished."""
    completed = Case(classname, name, failure_type="aborted")
    if run.status == "aborted":
        completed.failure = run.error or "the run was aborted"
    elif run.status != "complete":
        completed.failure = f"the run did not finish (status {run.status!r})"
    return completed


def write_run(run: RunResult, path: Path) -> Path:
    return write(path, f"loadtest {run.run_id}", run_suites(run))
