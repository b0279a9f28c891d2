"""SLO verdicts, computed from recorded results (never stored: the thresholds may change, the numbers do not).

Classes follow Kubernetes SIG Scalability:

- mutating API calls (POST, PUT, PATCH, DELETE; server-side APPLY is a PATCH by another name), judged per
  verb + resource + subresource against `mutating_p99_s`;
- read-only calls (GET, LIST) judged by scope: `resource` against `read_resource_p99_s`, `namespace` against
  `read_namespace_p99_s`, `cluster` against `read_cluster_p99_s`; WATCH and CONNECT are streaming and not SLO'd;
- pod startup (create -> Running, seen by a watch) p99 against `pod_startup_p99_s`.

Latencies are server side, from `apiserver_request_sli_duration_seconds` deltas over the step. An entry with
fewer than `min_samples` samples (default 100, see plan.DEFAULT_SLO) is shown as "few samples" and not judged
rather than passed or failed: below P99_SAMPLES samples a p99 is the slowest sample itself (pod startup's nearest
rank) or the histogram bucket of the slowest request (the rank 0.99 n lies past the second slowest), so one slow
request would decide the verdict; every p99 of fewer samples says so ("max of 3"). An SLO measured at one step
but with no request at another is "no samples" there, so each step judges the same SLOs and the not-judged count
covers every cell of the summary table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtests.analysis.fidelity import run_verdicts as fidelity_verdicts
from loadtests.analysis.promql import run_verdicts as promql_verdicts
from loadtests.analysis.roll import run_verdicts as roll_verdicts
from loadtests.config.plan import DEFAULT_SLO
from loadtests.results import RunResult, StepResult
from loadtests.results.apiserver import ServerLatency

MUTATING_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
READ_VERBS = ("GET", "LIST")
READ_SCOPES = ("resource", "namespace", "cluster")
SERVER_SOURCE = "apiserver_request_sli_duration_seconds"
POD_STARTUP_SOURCE = "watch receive times"
# Fewer samples than this and the p99 is the slowest one (or its histogram bucket): rank ceil(0.99 n) = n.
P99_SAMPLES = 100


@dataclass(frozen=True)
class Verdict:
    """One SLO judged on one step; `passed` is None when the step gave too few samples to judge."""

    step_index: int
    step_name: str
    nodes: int
    slo: str  # e.g. "mutating POST pods", "read LIST pods (cluster)", "pod startup"
    slo_class: str  # "mutating" | "read resource" | "read namespace" | "read cluster" | "pod startup"
    value_s: float | None
    threshold_s: float
    count: int
    passed: bool | None
    source: str
    reason: str = ""  # why not judged, or how it failed, in words
    bound: str = ""  # "<" or ">": value_s is only a bound of the p99 (the histogram's first or open last bucket)
    min_samples: float = 0  # the fewest samples the plan judges

    @property
    def few_samples(self) -> bool:
        """Too few samples to judge (the plan's `min_samples`): shown as "few samples" (or "no samples")."""
        return self.count < self.min_samples

    @property
    def p99_note(self) -> str:
        """"max of 3" where the p99 of so few samples is their slowest one (or its bucket); "" otherwise."""
        return f"max of {self.count:,}" if 0 < self.count < P99_SAMPLES and self.value_s is not None else ""

    @property
    def outcome(self) -> str:
        if self.passed is None and self.few_samples:
            return "no samples" if self.count == 0 else "few samples"
        return {True: "pass", False: "fail", None: "not judged"}[self.passed]


def thresholds(run: RunResult) -> dict[str, float]:
    """The run's own thresholds (from its plan), with the SIG Scalability defaults for anything missing."""
    stored = run.plan.get("slo") if isinstance(run.plan, dict) else None
    return {**DEFAULT_SLO, **(stored or {})}


def resource_label(entry: ServerLatency) -> str:
    """`resource[.group][/subresource]`: core and other groups can share a resource name (events)."""
    label = entry.resource
    if entry.group:
        label += f".{entry.group}"
    if entry.subresource:
        label += f"/{entry.subresource}"
    return label


def classify(entry: ServerLatency) -> tuple[str, str, str] | None:
    """(SLO name, class, threshold key) for a server entry, or None when the verb carries no SLO."""
    verb = entry.verb.upper()
    if verb in MUTATING_VERBS:
        return f"mutating {verb} {resource_label(entry)}", "mutating", "mutating_p99_s"
    if verb in READ_VERBS and entry.scope in READ_SCOPES:
        return (f"read {verb} {resource_label(entry)} ({entry.scope})", f"read {entry.scope}",
                f"read_{entry.scope}_p99_s")
    return None


def _judge(step: StepResult, slo: str, slo_class: str, value: float | None, threshold: float, count: int,
           min_samples: float, source: str, bound: str = "") -> Verdict:
    if count < min_samples:
        passed = None
        reason = (f"no samples in this step (judged from {min_samples:g})" if count == 0 else
                  f"few samples ({count:,} < {min_samples:g}): the p99 of {count:,} is their max, not judged")
    elif value is None:
        passed, reason = None, "no p99 recorded"
    elif (bound == "<" and value > threshold) or (bound == ">" and value < threshold):
        # a bound on the wrong side of the threshold: the p99 could be either side of it
        where = "under" if bound == "<" else "over"
        passed, reason = None, f"p99 {where} {value:g} s says nothing against {threshold:g} s"
    else:
        passed = value <= threshold if bound != ">" else False
        shown = f"over {value:g} s" if bound == ">" else f"{value:.3f} s"
        few = f" (the max of {count:,})" if count < P99_SAMPLES else ""
        reason = "" if passed else f"p99 {shown} > {threshold:g} s{few}"
    return Verdict(step_index=step.index, step_name=step.name, nodes=step.nodes, slo=slo, slo_class=slo_class,
                   value_s=value, threshold_s=threshold, count=count, passed=passed, source=source, reason=reason,
                   bound=bound, min_samples=min_samples)


def step_verdicts(step: StepResult, limits: dict[str, Any]) -> list[Verdict]:
    """Every SLO of one step: server entries in recorded order, then pod startup."""
    min_samples = float(limits["min_samples"])
    found = []
    for entry in step.server:
        kind = classify(entry)
        if kind is None:
            continue
        slo, slo_class, key = kind
        found.append(_judge(step, slo, slo_class, entry.p99, float(limits[key]), entry.count, min_samples,
                            SERVER_SOURCE, entry.bounds.get("p99", "")))
    startup = step.pod_startup
    found.append(_judge(step, "pod startup", "pod startup", startup.p99, float(limits["pod_startup_p99_s"]),
                        startup.count, min_samples, startup.source or POD_STARTUP_SOURCE))
    return found


def verdicts(run: RunResult) -> list[Verdict]:
    """Every SLO verdict of every recorded step, in step order; an SLO that another step measured and this one
    did not (no request of its kind) is "no samples" here, so the verdicts cover every cell of the summary."""
    limits = thresholds(run)
    per_step = [step_verdicts(step, limits) for step in run.steps]
    seen: dict[str, Verdict] = {}
    for found in per_step:
        for v in found:
            seen.setdefault(v.slo, v)
    filled = []
    for step, found in zip(run.steps, per_step, strict=True):
        have = {v.slo for v in found}
        filled += found + [_judge(step, v.slo, v.slo_class, None, v.threshold_s, 0, float(limits["min_samples"]),
                                  v.source) for slo, v in seen.items() if slo not in have]
    return filled


def failed_checks(run: RunResult) -> list[str]:
    """What the gate found failed, each in a few words with its step ("recovery at step 20 nodes"), in step order:
    a run that did not complete (aborted, or left "running" by a crash), a step that saturated (the control
    plane did not converge), an SLO, a scheduler-throughput phase that fell short of its threshold, a rolling
    upgrade's check (not available enough, not recovered, nodes or pods lost, an instance not replaced), a
    replay's fidelity target missed (one not measured fails nothing, as an SLO without samples), a PromQL check of
    the plan's that did not hold (analysis/promql.py). Empty: the run passed."""
    failed = [] if run.status == "complete" else [f"the run did not complete ({run.status})"]
    slos = [v for v in verdicts(run) if v.passed is False]
    rolled = [(step, v) for step, v in roll_verdicts(run) if v.passed is False]
    missed = [(step, v) for step, v in fidelity_verdicts(run) if v.passed is False]
    broken = [(step, v) for step, v in promql_verdicts(run) if v.passed is False]
    for step in run.steps:
        at = f" at step {step.name}"
        if step.status == "saturated":
            failed.append(f"saturated{at}")
        failed += [f"{v.slo} p99{at}" for v in slos if v.step_index == step.index]
        if step.scheduling is not None and step.scheduling.passed is False:
            failed.append(f"scheduler throughput{at}")
        failed += [f"{v.check}{at}" for rolled_at, v in rolled if rolled_at is step]
        failed += [f"replay fidelity: {v.check}{at}" for missed_at, v in missed if missed_at is step]
        failed += [f"PromQL check {v.check}{at}" for broken_at, v in broken if broken_at is step]
    return failed


def run_passed(run: RunResult) -> bool:
    """The gate: nothing failed (failed_checks)."""
    return not failed_checks(run)
