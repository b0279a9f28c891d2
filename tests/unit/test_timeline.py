"""`shape: timeline`: a replayed class's rate follows the captured per-minute curve, fitted to the step's window
(compressed into a shorter one, looped in whole passes in a longer one), its mean over the window its mean × k;
the requests' due times (the Locust user's schedule) from the curve's count."""

from __future__ import annotations

import math

import pytest

from loadtests.capture.replay import load_plan, plan_data
from loadtests.capture.replay_traffic import MEAN_MIX
from loadtests.config.scenarios import REQUESTS_USER_RATE, requests_users
from loadtests.config.timeline import Timeline, due_at, first_due, fit, requests_by
from loadtests.errors import PlanError
from tests.unit.test_replay_traffic import traffic, with_traffic

# three captured minutes: the first and last partial (30 s and 10 s of the window), 1/s, 3/s, then 0.5/s
CURVE = [(30.0, 30.0), (60.0, 180.0), (10.0, 5.0)]
MEAN = 215.0 / 100.0


def due_times(timeline: Timeline, rate: float, opened: float, until: float) -> list[float]:
    """Every request's due time as the class's Locust users take them (load/locust/scenarios/requests.py), from
    `opened` (the window's opening) to `until`, seconds after the opening."""
    found, j = [], math.floor(requests_by(timeline, rate, opened, opened))
    while (due := due_at(timeline, rate, opened, j)) < until:
        if due >= opened:
            found.append(due - opened)
        j += 1
    return found


def test_a_short_window_holds_one_pass_of_the_curve_compressed() -> None:
    timeline = fit(CURVE, 20.0)
    assert timeline is not None and timeline.passes == 1
    assert [s for s, _ in timeline.segments] == pytest.approx([6.0, 12.0, 2.0])  # each minute its share
    assert [f for _, f in timeline.segments] == pytest.approx([1 / MEAN, 3 / MEAN, 0.5 / MEAN])
    assert timeline.peak == pytest.approx(3 / MEAN)
    # at a mean of 10/s × k = 2: 400 requests in the window, 120 of them in the first 6 s, 720 / 2.15 in the next 12
    due = due_times(timeline, 20.0, opened=1_000.0, until=1_020.0)
    assert len(due) == 400
    assert sum(t < 6 for t in due) == round(20 * 6 / MEAN)
    assert sum(6 <= t < 18 for t in due) == round(20 * 36 / MEAN)


def test_a_long_window_loops_whole_passes_never_stretched() -> None:
    timeline = fit(CURVE, 250.0)  # 2.5 captured spans: 3 passes of 83.3 s, each compressed by less than half
    assert timeline is not None and timeline.passes == 3 and timeline.pass_s == pytest.approx(250.0 / 3)
    assert timeline.mean_count(250.0) == pytest.approx(250.0)  # the mean over the window is the class's mean
    assert timeline.mean_count(timeline.pass_s) == pytest.approx(timeline.pass_s)
    due = due_times(timeline, 4.0, opened=500.0, until=750.0)
    assert len(due) == 1_000
    busy = [sum(p * timeline.pass_s + 25.0 <= t < p * timeline.pass_s + 75.0 for t in due) for p in range(3)]
    assert busy == [round(4.0 * 50.0 * 3 / MEAN)] * 3  # each pass's busy minute, alike


def test_the_count_and_the_time_are_each_others_inverse_and_the_mean_outside_the_window() -> None:
    timeline = fit([(60.0, 0.0), (60.0, 120.0), (60.0, 60.0)], 90.0)  # a minute with no request at all
    assert timeline is not None
    for t in (-5.0, 0.0, 31.0, 44.0, 60.0, 89.0, 90.0, 120.0):
        assert timeline.time_of(timeline.mean_count(t)) == pytest.approx(t)
    assert [timeline.mean_count(t) for t in (10.0, 29.9)] == [0.0, 0.0]  # nothing due in the silent minute
    assert timeline.time_of(0.5) == pytest.approx(30.25)  # the first request: in the busy minute, at 2× the mean
    assert timeline.mean_count(-5.0) == -5.0 and timeline.mean_count(120.0) == 120.0  # the mean before and after
    assert flat(Timeline.from_dict(timeline.to_dict()).segments) == pytest.approx(flat(timeline.segments), abs=1e-3)


def flat(segments: tuple[tuple[float, float], ...]) -> list[float]:
    return [value for segment in segments for value in segment]


@pytest.mark.parametrize("timeline", [None, fit(CURVE, 20.0)])
def test_a_schedule_taken_anew_sends_nothing_already_due(timeline: Timeline | None) -> None:
    """As the window opens a user takes its schedule anew: its first request is the first due from then, never
    one it sent (a request sent twice as the window opened put a replayed class 14 % over at 2/s in 10 s)."""
    for now in (1_000.01, 1_000.26, 1_000.49, 1_000.51, 1_000.74, 1_005.3, 1_013.9):
        j = first_due(timeline, 2.0, 1_000.0, now)
        assert due_at(timeline, 2.0, 1_000.0, j - 1) < now <= due_at(timeline, 2.0, 1_000.0, j), now


@pytest.mark.parametrize("bad", [None, {"segments": [[1, 2]]}, {"segments": [], "passes": 1},
                                 {"segments": [[10, -1]], "passes": 1}, {"segments": [[10, 1]], "passes": 0}])
def test_a_timeline_that_is_none_is_refused_in_one_line(bad: object) -> None:
    with pytest.raises(PlanError) as refused:
        Timeline.from_dict(bad, "rows[0].timeline")
    assert str(refused.value).startswith("rows[0].timeline: ") and "\n" not in str(refused.value)


def timed_profile():  # noqa: ANN201 - a Profile, as test_replay_traffic builds it
    found = with_traffic()
    found.traffic = {**traffic(), "window": {"start": "2026-11-30T12:00:30.000Z", "end": "2026-11-30T12:02:10.000Z",
                                             "seconds": 100.0},
                     "per_minute": [{"minute": 0, "start": "2026-11-30T12:00:00.000Z", "total": 40,
                                     "verbs": {"list": 30, "get": 10}},
                                    {"minute": 1, "start": "2026-11-30T12:01:00.000Z", "total": 180,
                                     "verbs": {"list": 180}},
                                    {"minute": 2, "start": "2026-11-30T12:02:00.000Z", "total": 5,
                                     "verbs": {"list": 5, "get": 0}}]}
    return found


def test_a_plan_asked_for_the_timeline_gives_each_row_its_verbs_curve() -> None:
    data = plan_data(timed_profile(), 2, source="prod.yaml", duration_s=20.0, shape="timeline")
    rows = {(r["verb"], r["resource"]): r for r in data["load"]["scenarios"]["requests"]["rows"]}
    lists = Timeline.from_dict(rows[("list", "configmaps")]["timeline"])
    expected = fit(CURVE, 20.0)
    assert expected is not None and flat(lists.segments) == pytest.approx(flat(expected.segments), abs=1e-3)
    gets = Timeline.from_dict(rows[("get", "widgets")]["timeline"])
    assert [f for _, f in gets.segments] == pytest.approx([10 / 30 / 0.1, 0.0, 0.0], abs=1e-3)  # all of it in minute 0
    assert rows[("get", "widgets")]["rate"] == pytest.approx(4.0)  # the mean × k, as without a timeline
    assert "per-minute curve (timeline) of 100 s, 1 pass(es) over the window's 20 s" in data["replay"]["traffic"]
    # the users a class needs are for its peak: 4/s × 10 (all in the first 30 % of the window)
    assert requests_users(data["load"]["scenarios"]["requests"])["ReplayUserRequests"] == math.ceil(
        4.0 / 0.3 / REQUESTS_USER_RATE)
    assert plan_data(timed_profile(), 2, source="prod.yaml")["replay"]["traffic"] == MEAN_MIX
    assert "timeline" not in plan_data(timed_profile(), 2, source="prod.yaml")["load"]["scenarios"]["requests"][
        "rows"][0]


def test_the_timeline_of_a_profile_without_a_curve_or_an_unknown_shape_is_refused(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(PlanError, match="only a capture from an audit log has"):
        plan_data(with_traffic(), 1, source="prod.yaml", shape="timeline")
    timed_profile().write(tmp_path / "prod.yaml")
    (tmp_path / "plan.yaml").write_text("workload: {profile: prod.yaml, scale: 1, shape: wavy}\n")
    with pytest.raises(PlanError, match="shape 'wavy': the traffic over time is one of mean, timeline"):
        load_plan(tmp_path / "plan.yaml")
    (tmp_path / "plan.yaml").write_text("workload: {profile: prod.yaml, scale: 1, shape: timeline, duration_s: 30}\n")
    plan = load_plan(tmp_path / "plan.yaml")
    assert plan.replay is not None and "timeline" in plan.replay.traffic
