"""SLO verdicts from recorded results: classes, thresholds, boundaries, sample floors, the run gate."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from loadtests.analysis.slo import run_passed, verdicts
from loadtests.config.plan import DEFAULT_SLO
from loadtests.config.plan import parse as parse_plan
from loadtests.report.html import banner, write_report
from loadtests.results import RunResult, StepResult, load
from loadtests.results.apiserver import ServerLatency
from loadtests.results.distribution import Distribution
from tests.unit.reportdata import ABORTED, ROLLING, SAMPLE, edited_run


def server(verb: str, resource: str, scope: str, p99: float | None, count: int = 100,
           subresource: str = "") -> ServerLatency:
    return ServerLatency(verb=verb, resource=resource, scope=scope, subresource=subresource, group="", count=count,
                         p50=None if p99 is None else p99 / 4, p90=None if p99 is None else p99 / 2, p99=p99)


def run_with(entries: list[ServerLatency], slo: dict | None = None, status: str = "complete",
             pod_startup: Distribution | None = None) -> RunResult:
    plan = {"name": "t", "steps": [{"nodes": 10}], "load": {}}
    if slo is not None:
        plan["slo"] = slo
    step = StepResult(index=0, name="10 nodes", nodes=10, pods_per_node=0, started_at="2025-11-28T10:00:00+00:00",
                      duration_s=60.0, server=entries, pod_startup=pod_startup or Distribution())
    return RunResult(run_id="t", plan=plan, environment={}, status=status, steps=[step])


def by_name(run: RunResult) -> dict[str, object]:
    return {v.slo: v for v in verdicts(run)}


def test_sample_run_passes_with_every_class_judged() -> None:
    run = load(SAMPLE)
    found = verdicts(run)
    classes = {v.slo_class for v in found}
    assert classes == {"mutating", "read resource", "read namespace", "read cluster", "pod startup"}
    assert [v.step_index for v in found] == sorted(v.step_index for v in found)
    assert not any(v.passed is False for v in found)
    # the plan's min_samples (5) leaves PUT deployments/scale (4) and GET configmaps (3) unjudged in every step
    unjudged = {v.slo for v in found if v.passed is None}
    assert unjudged == {"mutating PUT deployments.apps/scale", "read GET configmaps (resource)"}
    assert run_passed(run)


def test_p99_just_above_threshold_fails_and_just_below_passes() -> None:
    run = run_with([server("POST", "pods", "namespace", 1.001), server("DELETE", "pods", "namespace", 0.999),
                    server("PATCH", "pods", "namespace", 1.0, subresource="status")])
    found = by_name(run)
    assert found["mutating POST pods"].passed is False
    assert "1.001" in found["mutating POST pods"].reason
    assert found["mutating DELETE pods"].passed is True
    assert found["mutating PATCH pods/status"].passed is True  # at the threshold is within it
    assert not run_passed(run)


def test_read_thresholds_depend_on_scope() -> None:
    run = run_with([server("GET", "pods", "resource", 1.5), server("LIST", "pods", "namespace", 1.5),
                    server("LIST", "pods", "cluster", 29.0), server("LIST", "nodes", "cluster", 31.0)])
    found = by_name(run)
    assert found["read GET pods (resource)"].passed is False
    assert found["read GET pods (resource)"].threshold_s == DEFAULT_SLO["read_resource_p99_s"]
    assert found["read LIST pods (namespace)"].passed is True
    assert found["read LIST pods (cluster)"].passed is True
    assert found["read LIST nodes (cluster)"].passed is False
    assert found["read LIST nodes (cluster)"].source == "apiserver_request_sli_duration_seconds"


def test_watch_and_connect_are_not_slo_d() -> None:
    run = run_with([server("WATCH", "pods", "cluster", 300.0), server("CONNECT", "pods", "namespace", 50.0,
                                                                      subresource="exec")])
    assert [v.slo for v in verdicts(run)] == ["pod startup"]
    assert run_passed(run)


def test_under_min_samples_is_few_samples_and_not_judged() -> None:
    run = run_with([server("POST", "pods", "namespace", 5.0, count=9), server("DELETE", "pods", "namespace", 5.0,
                                                                              count=10)],
                   slo={**DEFAULT_SLO, "min_samples": 10})
    found = by_name(run)
    assert found["mutating POST pods"].passed is None
    assert found["mutating POST pods"].outcome == "few samples"
    assert found["mutating POST pods"].reason.startswith("few samples (9 < 10): the p99 of 9 is their max")
    assert found["mutating DELETE pods"].passed is False
    assert found["mutating DELETE pods"].reason == "p99 5.000 s > 1 s (the max of 10)"


def test_by_default_a_p99_needs_100_samples_to_be_judged() -> None:
    """Below 100 samples the p99 is the slowest sample (nearest rank ceil(0.99 n) = n), or its bucket."""
    assert DEFAULT_SLO["min_samples"] == 100
    assert parse_plan({"name": "t", "steps": [{"nodes": 1}], "load": {}}, "t.yaml").slo["min_samples"] == 100
    # 3 GETs, one of them slow: the p99 is that one request; few samples, not a failure
    run = run_with([server("GET", "nodes", "resource", 1.24, count=3), server("POST", "pods", "namespace", 5.0,
                                                                           count=99),
                    server("DELETE", "pods", "namespace", 5.0, count=100)])
    found = by_name(run)
    assert found["read GET nodes (resource)"].outcome == "few samples"
    assert found["read GET nodes (resource)"].p99_note == "max of 3"
    assert found["mutating POST pods"].passed is None and found["mutating POST pods"].p99_note == "max of 99"
    assert found["mutating DELETE pods"].passed is False and found["mutating DELETE pods"].p99_note == ""
    # of 99 samples, the nearest-rank p99 is the largest: the pod startup figure of so few is its max
    assert Distribution.of([float(i) for i in range(99)], "t").p99 == 98.0
    assert Distribution.of([float(i) for i in range(100)], "t").p99 == 98.0
    # a plan may judge from fewer: then the same 3 GETs fail, and the reason says what the p99 is
    lowered = by_name(run_with([server("GET", "nodes", "resource", 1.24, count=3)], slo={"min_samples": 1}))
    assert lowered["read GET nodes (resource)"].passed is False
    assert "(the max of 3)" in lowered["read GET nodes (resource)"].reason


def test_an_slo_missing_from_a_step_is_no_samples_there(tmp_path: Path) -> None:
    """A step without a request of a kind another step judged: a "no samples" cell, counted as not judged."""
    def drop_list_nodes(data: dict) -> None:
        step = data["steps"][1]
        step["server"] = [e for e in step["server"] if not (e["verb"] == "LIST" and e["resource"] == "nodes")]

    folder = edited_run(SAMPLE, tmp_path / "run", drop_list_nodes)
    run = load(folder)
    found = verdicts(run)
    missing = [v for v in found if v.slo == "read LIST nodes (cluster)" and v.step_index == 1]
    assert len(missing) == 1 and missing[0].count == 0 and missing[0].outcome == "no samples"
    assert {v.step_index for v in found if v.slo == "read LIST nodes (cluster)"} == {0, 1, 2}
    assert [v.step_index for v in found] == sorted(v.step_index for v in found)
    unjudged = sum(v.passed is None for v in found)
    assert f"{unjudged} not judged" in banner(run, found)["counts"]
    html = write_report(folder).read_text(encoding="utf-8")
    table = html[html.index('<h2 id="slo">'):html.index('<h2 id="charts">')]
    assert "entries with fewer than 5 samples are shown as few samples and not judged" in table
    cells = re.findall(r'<td class="n (skip|pass|fail|muted)"', table)
    assert "muted" not in cells  # no "—" cell
    assert cells.count("skip") == unjudged
    assert "few samples: max of 4" in table and "no samples" in table


def test_plan_thresholds_override_defaults_and_missing_ones_fall_back() -> None:
    entries = [server("POST", "pods", "namespace", 0.6)]
    assert by_name(run_with(entries, slo={"mutating_p99_s": 0.5}))["mutating POST pods"].passed is False
    assert by_name(run_with(entries))["mutating POST pods"].threshold_s == DEFAULT_SLO["mutating_p99_s"]


def test_pod_startup_verdict_and_source() -> None:
    slow = Distribution(count=200, p50=1.0, p90=3.0, p99=5.2, max=6.0, source="watch receive times")
    found = by_name(run_with([], pod_startup=slow))["pod startup"]
    assert found.passed is False
    assert found.threshold_s == DEFAULT_SLO["pod_startup_p99_s"]
    assert found.source == "watch receive times"
    empty = by_name(run_with([]))["pod startup"]
    assert empty.passed is None


@pytest.mark.parametrize("status", ["aborted", "running"])
def test_run_that_did_not_complete_does_not_pass(status: str) -> None:
    assert not run_passed(run_with([server("POST", "pods", "namespace", 0.1)], status=status))


def test_aborted_fixture_fails_the_gate_even_with_passing_steps() -> None:
    run = load(ABORTED)
    assert run.status == "aborted" and len(run.steps) == 1
    assert not any(v.passed is False for v in verdicts(run))
    assert not run_passed(run)


def test_verdicts_do_not_change_the_run() -> None:
    run = load(SAMPLE)
    before = copy.deepcopy(run)
    verdicts(run)
    assert run == before


def test_the_last_line_names_every_check_that_failed_not_only_the_slos() -> None:
    from loadtests.cli.run import final_line

    assert final_line(load(SAMPLE)) == "PASS: 33/33 SLO checks passed over 3 steps"
    rolled = load(ROLLING)  # every SLO held; the roll was not available enough
    assert final_line(rolled) == "FAIL: 8/8 SLO checks passed over 1 step; failed: availability at step roll"
    assert rolled.steps[0].roll is not None
    rolled.steps[0].roll.error = "the window closed before kube-scheduler was replaced (3 instances replaced)"
    assert final_line(rolled).endswith("failed: roll completed at step roll, availability at step roll")
    slow = run_with([server(verb, "pods", "namespace", 2.0) for verb in ("POST", "PUT", "PATCH", "DELETE")]
                    + [server("LIST", "pods", "cluster", 60.0)])
    slow.steps[0].status = "saturated"
    assert final_line(slow) == ("FAIL: 0/5 SLO checks passed over 1 step; failed: saturated at step 10 nodes, "
                                "mutating POST pods p99 at step 10 nodes, mutating PUT pods p99 at step 10 nodes, "
                                "mutating PATCH pods p99 at step 10 nodes and 2 more")
    assert final_line(run_with([], status="aborted")).endswith("failed: the run did not complete (aborted)")
