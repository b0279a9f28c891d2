"""API Priority and Fairness per priority level over a window (analysis/flow_control.py), from recorded and
written /metrics pages: a new probe with a section of its own in results and a table in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtests.analysis.flow_control import flow_control
from loadtests.analysis.metrics import Snapshot
from loadtests.results import RunResult, StepResult, from_dict, to_dict
from loadtests.results.flow_control import ClientClass, FlowControlLevel, FlowControlSchema, FlowControlSection

DATA = Path(__file__).parent / "data"
BUCKETS = ("0", "0.005", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "15", "30", "+Inf")


def page(dispatched: float, waits: dict[str, float], rejected: float | None, in_queue: float = 0,
         level: str = "tenant-noisy") -> Snapshot:
    """One priority level's APF families as an apiserver with APF on serves them; waits: le -> cumulative count."""
    schema = f'flow_schema="{level}",priority_level="{level}"'
    lines = [f'apiserver_flowcontrol_nominal_limit_seats{{priority_level="{level}"}} 10',
             f"apiserver_flowcontrol_dispatched_requests_total{{{schema}}} {dispatched}",
             f"apiserver_flowcontrol_current_inqueue_requests{{{schema}}} {in_queue}"]
    if rejected is not None:
        lines.append(f'apiserver_flowcontrol_rejected_requests_total{{{schema},reason="queue-full"}} {rejected}')
    count = 0.0
    for le in BUCKETS:
        count = waits.get(le, count)
        lines.append(f'apiserver_flowcontrol_request_wait_duration_seconds_bucket{{execute="true",{schema},le="{le}"}} '
                     f"{count}")
    lines.append(f'apiserver_flowcontrol_request_wait_duration_seconds_count{{execute="true",{schema}}} {count}')
    lines.append(f'apiserver_flowcontrol_request_wait_duration_seconds_sum{{execute="true",{schema}}} 1')
    return Snapshot.parse("\n".join(lines) + "\n")


def test_recorded_pages_give_each_level_its_requests() -> None:
    """A quiet 1.37 apiserver: the controllers' requests in workload-high, none of them kept waiting; the exempt
    level (system:masters, the probes) has no queue at all, so its queue figures are not measured, never 0."""
    start, end = (Snapshot.parse((DATA / f"apiserver-health_v1.37.2_{which}.txt").read_text())
                  for which in ("start", "end"))
    rows = {r.priority_level: r for r in flow_control(start, end)}
    assert list(rows) == ["exempt", "workload-high"]  # most dispatched first
    assert rows["exempt"].dispatched == 102 and rows["exempt"].queued is None and rows["exempt"].waited is None
    high = rows["workload-high"]
    assert (high.dispatched, high.waited, high.queued, high.queued_over_s) == (25, 25, 0, 0.005)
    assert (high.wait_p99_s, high.wait_bound) == (0.005, "<")  # microsecond waits: all it says is "under 5 ms"
    assert high.rejected is None  # this page was kept without the family that says APF is on: not measured


def test_a_flooded_level_queues_waits_and_is_turned_away() -> None:
    start = page(100, {"0": 0, "0.005": 100}, rejected=None)
    end = page(400, {"0": 0, "0.005": 150, "0.5": 300, "2": 390, "5": 400}, rejected=37, in_queue=12)
    (row,) = flow_control(start, end)
    assert row == FlowControlLevel("tenant-noisy", dispatched=300, queued=250, queued_over_s=0.005, rejected=37,
                                   waited=300, wait_p99_s=pytest.approx(4.1), wait_bound="", in_queue_at_close=12,
                                   flow_schemas=[FlowControlSchema(
                                       "tenant-noisy", dispatched=300, queued=250, rejected=37, waited=300,
                                       wait_p99_s=pytest.approx(4.1), wait_bound="", in_queue_at_close=12)])


def test_each_level_gives_its_flow_schemas_their_own_figures() -> None:
    """A written pair in a 1.37 apiserver's format: workload-high fed by two flow schemas, one of them queued
    and turned away, the other not; global-default by one, flooded; the exempt level by one that never queues."""
    start, end = (Snapshot.parse((DATA / f"apiserver-flowcontrol-schemas_v1.37.2_{which}.txt").read_text())
                  for which in ("start", "end"))
    rows = {r.priority_level: r for r in flow_control(start, end)}
    assert list(rows) == ["global-default", "exempt", "workload-high"]  # most dispatched first
    high = rows["workload-high"]
    assert (high.dispatched, high.waited, high.queued, high.rejected) == (330, 330, 150, 5)
    by_schema = {s.flow_schema: s for s in high.flow_schemas}
    assert list(by_schema) == ["kube-controller-manager", "kube-system-service-accounts"]
    manager, accounts = by_schema["kube-controller-manager"], by_schema["kube-system-service-accounts"]
    assert (manager.dispatched, manager.waited, manager.queued, manager.rejected) == (300, 300, 150, 5)
    assert manager.wait_p99_s is not None and 0.5 < manager.wait_p99_s <= 1.0  # its slowest waits: (0.5 s, 1 s]
    assert (accounts.dispatched, accounts.waited, accounts.queued, accounts.rejected) == (30, 30, 0, 0)
    assert (accounts.wait_p99_s, accounts.wait_bound) == (0.005, "<")
    # the schemas add up to their level
    assert sum(s.dispatched or 0 for s in high.flow_schemas) == high.dispatched
    assert sum(s.queued or 0 for s in high.flow_schemas) == high.queued
    (default,) = rows["global-default"].flow_schemas
    assert (default.flow_schema, default.dispatched, default.queued, default.rejected, default.in_queue_at_close) == (
        "global-default", 1000, 600, 37, 4)  # both reasons of rejection
    (exempt,) = rows["exempt"].flow_schemas
    assert (exempt.dispatched, exempt.queued, exempt.rejected) == (400, None, 0)


def test_recorded_pages_give_each_flow_schema_of_a_level_its_requests() -> None:
    """The quiet 1.37 apiserver again: workload-high's requests are the controllers' and kube-system's service
    accounts', each under its own flow schema; the exempt level's the admin's and the health probes'."""
    start, end = (Snapshot.parse((DATA / f"apiserver-health_v1.37.2_{which}.txt").read_text())
                  for which in ("start", "end"))
    rows = {r.priority_level: r for r in flow_control(start, end)}
    assert [(s.flow_schema, s.dispatched) for s in rows["workload-high"].flow_schemas] == [
        ("kube-scheduler", 20), ("kube-system-service-accounts", 4), ("kube-controller-manager", 1)]
    assert [(s.flow_schema, s.dispatched) for s in rows["exempt"].flow_schemas] == [("exempt", 102)]


def test_no_rejection_is_zero_only_where_apf_is_on() -> None:
    quiet = page(10, {"0.005": 10}, rejected=None)
    assert flow_control(quiet, quiet) == []  # nothing dispatched, queued or rejected: no row
    assert flow_control(page(5, {"0.005": 5}, None), page(9, {"0.005": 9}, None))[0].rejected == 0
    assert flow_control(None, Snapshot.parse("process_cpu_seconds_total 1\n")) == []  # APF off: not measured


def test_the_section_travels_in_results_and_older_steps_have_none() -> None:
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=0, started_at="", duration_s=1.0)
    assert step.section(FlowControlSection).flow_control == []  # older files: not measured
    step.put(FlowControlSection([FlowControlLevel("global-default", dispatched=3, rejected=1)]))
    data = to_dict_of(step)
    assert data["flow_control"][0]["priority_level"] == "global-default"
    again = from_dict({"schema_version": 1, "run_id": "r", "plan": {}, "environment": {}, "steps": [data]})
    assert again.steps[0].flow_control == step.flow_control


def to_dict_of(step: StepResult) -> dict:
    return to_dict(RunResult(run_id="r", plan={}, environment={}, steps=[step]))["steps"][0]


def test_flow_schemas_and_client_classes_travel_in_results_and_older_files_load_without_them() -> None:
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=0, started_at="", duration_s=1.0)
    step.put(FlowControlSection([FlowControlLevel("global-default", dispatched=3, flow_schemas=[
        FlowControlSchema("global-default", dispatched=2), FlowControlSchema("tenant-a", dispatched=1)])]))
    run = RunResult(run_id="r", plan={}, environment={}, steps=[step], clients=[
        ClientClass("load", user="loadtest-load", groups=["system:authenticated"], flow_schema="global-default",
                    priority_level="global-default", exempt=False)])
    data = json.loads(json.dumps(to_dict(run)))
    assert data["clients"][0]["flow_schema"] == "global-default"
    again = from_dict(data)
    assert again.clients == run.clients and again.steps[0].flow_control == step.flow_control
    # a file written before either: no clients, levels without their flow schemas
    del data["clients"]
    del data["steps"][0]["flow_control"][0]["flow_schemas"]
    older = from_dict(data)
    assert older.clients == [] and older.steps[0].flow_control == [FlowControlLevel("global-default", dispatched=3)]
