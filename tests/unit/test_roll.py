"""A rolling upgrade's arithmetic and its rules: the order instances are replaced in, which versions may be
rolled, the plan's `roll` section, the probe's seconds, availability and recovery, and the health watch told
of an instance stopped on purpose."""

from __future__ import annotations

import pytest

from loadtests.analysis import roll as analysis
from loadtests.config import plan as plan_mod
from loadtests.config.topology import Topology
from loadtests.config.versions import upgrade_problem
from loadtests.controlplane.health import HealthCheck, HealthWatch
from loadtests.errors import EXIT_BAD_INPUT, PlanError
from loadtests.measure.availability import per_second
from loadtests.results import StepResult
from loadtests.results.health import ClusterHealth, HealthSummary
from loadtests.results.roll import ProbeSecond, RollMark, RollResult
from loadtests.run.roll import roll_order, window_refusal


def test_instances_are_replaced_apiservers_first_and_a_downgrade_the_other_way_round() -> None:
    topology = Topology(etcd_members=3, apiservers=2, schedulers=2, controller_managers=1)
    assert roll_order(topology) == ["kube-apiserver", "kube-apiserver-2", "kube-controller-manager",
                                    "kube-scheduler", "kube-scheduler-2"]
    assert roll_order(topology, downgrade=True)[:2] == ["kube-scheduler-2", "kube-scheduler"]
    assert roll_order(topology, downgrade=True)[-1] == "kube-apiserver"


@pytest.mark.parametrize(("from_version", "to_version", "words"), [
    ("v1.36.3", "v1.37.2", None),
    ("v1.37.1", "v1.37.2", None),  # a patch release
    ("v1.35.0", "v1.37.2", "skips a minor version"),
    ("v1.37.2", "v1.36.3", "not newer"),
    ("v1.37.2", "v1.37.2", "not newer"),
])
def test_only_an_upgrade_of_at_most_one_minor_version_is_rolled(from_version: str, to_version: str,
                                                                 words: str | None) -> None:
    problem = upgrade_problem(from_version, to_version)
    assert (problem is None) if words is None else (problem is not None and words in problem)


def plan_with(roll: object) -> plan_mod.Plan:
    return plan_mod.parse({"name": "p", "steps": [{"nodes": 5, "name": "small"}, {"nodes": 10, "name": "big"}],
                           "load": {}, "roll": roll}, "p.yaml")


def test_the_roll_section_defaults_to_the_last_step_and_refuses_a_step_that_is_not_there() -> None:
    assert plan_mod.roll_step(plan_with({})) == 1
    assert plan_mod.roll_step(plan_with({"step": "small", "pause_s": 0})) == 0
    with pytest.raises(PlanError, match=r"p.yaml: roll.step: no step is named 'huge' \(the steps: small, big\)"):
        plan_with({"step": "huge"})
    with pytest.raises(PlanError, match="roll.availability_pct: must be a share from 0 to 100"):
        plan_with({"availability_pct": 150})
    with pytest.raises(PlanError, match="roll.pause: unknown field"):
        plan_with({"pause": 3})
    assert "roll" not in plan_with({}).to_dict()  # a plan that sets no roll keeps its digest


def test_a_window_too_short_for_the_roll_is_refused_naming_the_seconds_it_needs() -> None:
    plan = plan_with({"steady_s": 10, "pause_s": 5, "recovery_s": 30})
    plan.target.topology = Topology(etcd_members=3, apiservers=2)  # 2 apiservers, a controller-manager, a scheduler
    plan.steps[1].duration_s = 55  # 10 + 3 pauses of 5 + 30
    assert window_refusal(plan) is None
    refused = window_refusal(plan, rollback=True)  # 8 replacements: 10 + 7 × 5 + 30 = 75 s
    assert refused == ("p.yaml: steps[1].duration_s: 55 s cannot hold a rolling upgrade of 4 instances "
                       "(kube-apiserver, kube-apiserver-2, kube-controller-manager, kube-scheduler, each twice "
                       "(--rollback)): that "
                       "needs at least 75 s (roll.steady_s 10 + 7 × roll.pause_s 5 + roll.recovery_s 30, before the "
                       "restarts themselves); raise duration_s, or lower roll.steady_s, roll.pause_s or "
                       "roll.recovery_s")


def test_rehearse_rolling_refuses_the_smoke_plans_short_window_before_anything_starts(monkeypatch, capsys) -> None:
    from loadtests.cli import main as cli

    monkeypatch.setattr(cli.SHUTDOWN, "install", lambda: None)  # this process keeps its own signal handlers
    monkeypatch.setattr("loadtests.binaries.cache.find", lambda *_a: pytest.fail("binaries looked up"))
    code = cli.main(["rehearse", "--rolling", "--plan", "smoke", "--from", "v1.36.3", "--to", "v1.37.2"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1, err
    assert "smoke.yaml: steps[1].duration_s: 20 s cannot hold a rolling upgrade of 4 instances" in err, err
    assert "that needs at least 110 s" in err, err


def test_probe_answers_fold_into_seconds_with_their_slowest_and_what_failed() -> None:
    seconds = per_second([(0, "ok", 0.01), (0, "ok", 0.03), (1, "connection", 5.0), (1, "ok", 0.02),
                          (3, "503", 0.001)])
    assert seconds == [ProbeSecond(t=0, sent=2, served=2, slowest_s=0.03),
                       ProbeSecond(t=1, sent=2, served=1, slowest_s=0.02, failed={"connection": 1}),
                       ProbeSecond(t=3, sent=1, served=0, slowest_s=None, failed={"503": 1})]


def second(t: int, slowest: float, failed: int = 0) -> ProbeSecond:
    return ProbeSecond(t=t, sent=10, served=10 - failed, slowest_s=slowest,
                       failed={"connection": failed} if failed else {})


def rolled(seconds: list[ProbeSecond], *, finished: float | None = 30.0, started: float = 10.0) -> RollResult:
    marks = [RollMark("kube-apiserver", "v1.37.2", 10.0, 20.0, 21.0, 1.5, 8.5)]
    return RollResult(from_version="v1.36.3", to_version="v1.37.2", started_at_s=started, finished_at_s=finished,
                      marks=marks, seconds=seconds, thresholds={"availability_pct": 99.5, "recovery_s": 10})


def test_recovery_is_the_time_until_five_seconds_in_a_row_are_served_within_the_steady_range() -> None:
    steady = [second(t, 0.020) for t in range(10)]  # the steady range's top: 20 ms
    during = [second(t, 0.015) for t in range(10, 30)]
    during[5] = second(15, 0.300, failed=2)  # an apiserver's connections cut
    after = [second(30, 0.050), second(31, 0.019), second(32, 0.018), second(33, 0.030)] + \
        [second(t, 0.010) for t in range(34, 40)]
    found = analysis.figures(rolled(steady + during + after))
    assert found.steady_slowest_s == 0.020 and found.steady_seconds == 10
    assert found.recovery_s == 4.0  # 34 .. 38 all within 20 ms: 4 s after the last instance was back
    assert found.roll_seconds == 30 and found.failed == {"connection": 2}
    assert found.seconds_served_pct == pytest.approx(100 * 29 / 30, abs=0.001)
    assert found.requests_served_pct == pytest.approx(100 * 298 / 300, abs=0.001)
    # never back within the steady range: not recovered, which fails its check rather than passing by default
    slow = analysis.figures(rolled(steady + during + [second(t, 0.5) for t in range(30, 40)]))
    assert slow.recovery_s is None


def step_with(roll: RollResult, summary: HealthSummary | None = None) -> StepResult:
    return StepResult(index=1, name="big", nodes=10, pods_per_node=1, started_at="", duration_s=40.0, roll=roll,
                      health=ClusterHealth(summary=summary or HealthSummary()))


def test_the_checks_go_either_way_and_what_was_not_measured_says_so() -> None:
    steady = [second(t, 0.020) for t in range(10)]
    fine = steady + [second(t, 0.010) for t in range(10, 40)]
    checks = {v.check: v for v in analysis.verdicts(step_with(rolled(fine), HealthSummary(nodes_not_ready_max=0,
                                                                                          pods_evicted=0)))}
    assert [v.passed for v in checks.values()] == [True, True, True, True, True]
    assert checks["recovery"].value == "0.0 s"
    lossy = steady + [second(t, 0.010, failed=1 if t % 10 == 0 else 0) for t in range(10, 40)]
    checks = {v.check: v for v in analysis.verdicts(step_with(rolled(lossy, finished=None),
                                                              HealthSummary(nodes_not_ready_max=3)))}
    assert checks["availability"].passed is False and "90 % of 30 s fully served" in checks["availability"].value
    assert checks["roll completed"].passed is False
    assert checks["recovery"].passed is None and "did not finish" in checks["recovery"].value
    assert checks["nodes stayed Ready"].passed is False
    assert checks["no pod evicted"].passed is None and "not measured" in checks["no pod evicted"].value
    short = analysis.verdicts(step_with(rolled(steady[:3] + fine[10:], started=3.0)))
    assert next(v for v in short if v.check == "recovery").passed is None  # too few steady seconds for a range


def test_an_instance_stopped_on_purpose_is_neither_an_event_nor_a_fault_but_counts_against_the_tolerance() -> None:
    problems: dict[str, str | None] = {"kube-apiserver": None, "kube-apiserver-2": None}
    events: list[str] = []
    checks = [HealthCheck(name, lambda name=name: problems[name], group="kube-apiserver", tolerated=1)
              for name in problems]
    health = HealthWatch(checks, on_fault=lambda _r: None, on_event=events.append)
    health.pause("kube-apiserver")
    problems["kube-apiserver"] = "exited (code 0)"
    assert health.check_once() is None and events == []
    problems["kube-apiserver-2"] = "exited (code 137)"  # the other one lost while the first is replaced
    assert health.check_once() == ("kube-apiserver-2 exited (code 137) (2 of 2 kube-apiserver lost (one of them "
                                   "being replaced): more than the 1 the cluster survives)")
    problems["kube-apiserver-2"] = None
    health.resume(HealthCheck("kube-apiserver", lambda: None, group="kube-apiserver", tolerated=1))
    assert health.check_once() is None and events == []


def test_an_instance_paused_while_a_round_of_checks_runs_is_not_a_fault() -> None:
    """The roll stops an instance while the watch's thread is in the middle of a round that still holds its
    check: the check finds the process gone, and the round must not call that a loss."""
    holder: list[HealthWatch] = []

    def stopped_meanwhile() -> str:
        holder[0].pause("kube-scheduler")  # the roll's thread, between this round's start and this check
        return "exited (code 1)"

    health = HealthWatch([HealthCheck("kube-scheduler", stopped_meanwhile, group="kube-scheduler")],
                         on_fault=lambda _r: None)
    holder.append(health)
    assert health.check_once() is None


def test_a_roll_aborted_before_its_window_opened_stops_cleanly(tmp_path) -> None:
    """A step that fails while its load starts aborts a roll that never started: nothing to join, no error
    that would hide the step's own."""
    from loadtests.binaries.cache import Binaries
    from loadtests.config.plan import Roll
    from loadtests.kube.access import ClusterAccess
    from loadtests.measure.availability import AvailabilityProbe
    from loadtests.run.roll import RollingUpgrade, RollRequest

    bins = Binaries("v1.37.2", *(tmp_path / name for name in ("etcd", "a", "s", "c", "k", "kc")))
    probe = AvailabilityProbe(ClusterAccess(server="https://127.0.0.1:1", kubeconfig=""), {}, qps=10)
    roll = RollingUpgrade(RollRequest(0, bins, bins), Roll(), Topology(apiservers=2), target=None,  # type: ignore[arg-type]
                          watch=None, probe=probe, say=lambda _m: None)
    roll.abort()
    assert roll.result.marks == [] and roll.result.finished_at_s is None
