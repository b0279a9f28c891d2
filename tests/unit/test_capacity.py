"""The capacity search's choice of the next scale, its summary from results, and the plans it refuses."""

from __future__ import annotations

import pytest

from loadtests.config import plan as plan_mod
from loadtests.errors import PlanError
from loadtests.results import RunResult, StepResult
from loadtests.results.apiserver import ServerLatency
from loadtests.run.capacity import CapacitySearch, PlannedSteps, summarize


def plan_of(steps: list[int], capacity: dict | None = None) -> plan_mod.Plan:
    data = {"name": "cap", "steps": [{"nodes": n, "duration_s": 5} for n in steps],
            "load": {"scenarios": {"pod_churn": {"rate": 1}}}}
    if capacity is not None:
        data["capacity"] = capacity
    return plan_mod.parse(data, "cap.yaml")


def result(index: int, nodes: int, *, saturated: bool = False, p99: float = 0.1) -> StepResult:
    step = StepResult(index, f"{nodes} nodes", nodes, 0, "", 5.0)
    if saturated:
        step.status, step.saturation = "saturated", {"condition": f"{nodes} nodes Ready",
                                                     "evidence": "40 of 200 nodes NotReady"}
    else:
        step.server = [ServerLatency("POST", "pods", "namespace", "", "", 100, 0.01, 0.05, p99)]
    return step


def drive(search: CapacitySearch, holds_up_to: int) -> list[int]:
    """The scales a search tries against a control plane that holds up to `holds_up_to` nodes."""
    tried, step, index = [], search.first(), 0
    while step is not None:
        tried.append(step.nodes)
        held = step.nodes <= holds_up_to
        step = search.next(result(index, step.nodes, saturated=not held), held)
        index += 1
        assert index < 50
    return tried


def test_grows_by_the_factor_then_narrows_to_the_resolution() -> None:
    search = CapacitySearch(plan_of([100], {"growth": 2.0, "max_nodes": 100_000, "resolution": 0.1}))
    tried = drive(search, holds_up_to=700)
    assert tried[:4] == [100, 200, 400, 800]
    assert search.held is not None and search.failed is not None
    assert 630 <= search.held <= 700 < search.failed  # within 10 % of the true limit
    assert search.failed - search.held <= 0.1 * search.held


def test_stops_at_max_nodes_when_nothing_breaks() -> None:
    tried = drive(CapacitySearch(plan_of([5], {"growth": 2.0}), max_nodes=20), holds_up_to=10_000)
    assert tried == [5, 10, 20]


def test_grows_along_the_plans_own_steps_without_a_growth_factor() -> None:
    tried = drive(CapacitySearch(plan_of([100, 300, 600], {"max_nodes": 2000})), holds_up_to=10_000)
    assert tried == [100, 300, 600, 1200, 2000]  # then at the ratio of the last two steps


def test_a_first_step_that_does_not_hold_ends_the_search() -> None:
    assert drive(CapacitySearch(plan_of([100], {"growth": 1.5})), holds_up_to=50) == [100]


def test_refusals_are_one_line() -> None:
    with pytest.raises(PlanError, match="--max-nodes 50 is below the plan's first step"):
        CapacitySearch(plan_of([100], {"growth": 1.5}), max_nodes=50)
    with pytest.raises(PlanError, match="needs a growth rule"):
        CapacitySearch(plan_of([100]))
    with pytest.raises(PlanError, match=r"capacity.growth: must be a number >= 1.05"):
        plan_of([100], {"growth": 1.0})


def test_the_summary_names_the_breaking_point_from_results_alone() -> None:
    plan = plan_of([100], {"growth": 2.0})
    run = RunResult("r", plan.to_dict(), {}, steps=[result(0, 100), result(1, 200, p99=2.5),
                                                     result(2, 150, saturated=True), result(3, 125)])
    summary = summarize(run)
    assert (summary.held, summary.failed) == (125, 150)
    assert summary.line() == ("largest scale where every SLO held: 125 nodes; at 150: 150 nodes Ready: 40 of 200 "
                              "nodes NotReady")
    only_good = RunResult("r", plan.to_dict(), {}, steps=[result(0, 100)])
    assert "stopped at its limit of 400 nodes" in summarize(only_good, max_nodes=400).line()
    # a held step whose p99s rest on too few requests says how few of its checks were judged
    few = result(0, 100)
    few.server[0] = ServerLatency("POST", "pods", "namespace", "", "", 3, 0.01, 0.05, 0.1)
    few.server.append(ServerLatency("GET", "pods", "namespace", "", "", 500, 0.01, 0.05, 0.1))
    line = summarize(RunResult("r", plan.to_dict(), {}, steps=[few])).line()
    assert line == ("largest scale where every SLO held: 100 nodes (1 of 2 SLO checks judged there; the others had "
                    "too few samples)")


def test_an_aborted_search_says_it_did_not_finish_and_what_held_before() -> None:
    plan = plan_of([100], {"growth": 2.0})
    cut = RunResult("r", plan.to_dict(), {}, status="aborted", error="etcd killed by SIGKILL during step 3",
                    steps=[result(0, 100), result(1, 200)])
    line = summarize(cut, max_nodes=400).line()
    assert line == ("the search did not finish (etcd killed by SIGKILL during step 3); before it stopped, the "
                    "largest scale where every SLO held was 200 nodes")
    assert "limit" not in line
    nothing = RunResult("r", plan.to_dict(), {}, status="aborted", error="interrupted by SIGHUP", steps=[])
    assert summarize(nothing).line() == ("the search did not finish (interrupted by SIGHUP): no step finished, so "
                                         "no scale is known to hold")
    broke = RunResult("r", plan.to_dict(), {}, status="aborted", error="x",
                      steps=[result(0, 100), result(1, 200, p99=2.5)])
    assert summarize(broke).line() == ("the search did not finish (x); before it stopped, the largest scale where "
                                       "every SLO held was 100 nodes; at 200: mutating POST pods p99 2.500 s > 1 s")


def test_planned_steps_stop_growing_after_a_saturated_step() -> None:
    chooser = PlannedSteps(plan_of([10, 20, 30]))
    assert chooser.next(result(0, 10), True) is not None
    assert chooser.next(result(1, 20, saturated=True), False) is None


def test_a_phase_did_not_hold_when_the_scheduler_was_slow_or_a_controller_not_done() -> None:
    from loadtests.config.plan import DEFAULT_SLO
    from loadtests.results.controlled import ControlledPods
    from loadtests.results.scheduling import SchedulingThroughput
    from loadtests.run.capacity import step_failures

    step, limits = result(0, 100), dict(DEFAULT_SLO)
    assert step_failures(step, limits) == []
    step.scheduling = SchedulingThroughput(pods=1000, interval_s=5, samples=[40.0, 62.5], max=62.5, threshold=100,
                                           passed=False)
    step.controlled = {"Deployment": ControlledPods(unfinished=2, unfinished_named=["ns/a (generation 1)",
                                                                                    "ns/b (generation 2)"]),
                       "Job": ControlledPods()}
    assert step_failures(step, limits) == [
        "scheduler throughput at best 62.5 pods/s < 100 pods/s",
        "2 Deployment generation(s) not done when the window closed (ns/a (generation 1), ns/b (generation 2))"]
    step.scheduling.passed = None  # not every pod was scheduled: not judged here (the unfinished say it)
    assert len(step_failures(step, limits)) == 1
