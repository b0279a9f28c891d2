"""The pieces of the relist-storm lesson, on recorded or scripted data: the WatchList request, an informer's
return to sync (from its cut, the sync itself, the bytes it took), a step's apiserver restart as a roll onto
the same version, the plan's restart field, the lesson's reads of a restarted apiserver's counters and the page's
line against the report's figures."""

from __future__ import annotations

import gzip
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from loadtests.analysis.formats import in_unit
from loadtests.analysis.judge import compare_variants
from loadtests.analysis.lesson import against_report
from loadtests.analysis.query import scrape_reading
from loadtests.analysis.restart import restart_notes
from loadtests.analysis.scrapes import scrape_path
from loadtests.binaries.cache import Binaries
from loadtests.config import lesson as lesson_mod
from loadtests.config import plan as plan_mod
from loadtests.config.plan import Roll
from loadtests.config.scenarios import SYNCED, achieved_rates, informer_names, informer_sync_names, scenario_params
from loadtests.config.topology import Topology
from loadtests.controlplane.health import HealthCheck
from loadtests.controlplane.local import Replacement
from loadtests.errors import PlanError
from loadtests.kube.reflector import Backoff, Reflector, SyncClock
from loadtests.kube.watch import INITIAL_EVENTS_END, WatchEvent, ends_initial_events, watch_query
from loadtests.measure.processes import peak_rss_bytes
from loadtests.results import StepResult
from loadtests.results.loadgen import ClientStat
from loadtests.results.roll import RollMark, RollResult
from loadtests.run.roll import RollingUpgrade, restart_request, roll_order
from tests.unit.test_kube_protocol import FakeApi, FakeStream, event


def test_a_watch_list_request_asks_for_the_state_first_with_what_the_apiserver_requires() -> None:
    plain = watch_query(timeout_s=300.4, resource_version="42")
    assert plain == {"watch": "1", "timeoutSeconds": 300, "allowWatchBookmarks": "true", "resourceVersion": "42"}
    streaming = watch_query(timeout_s=300, bookmarks=False, initial_events=True)
    # bookmarks are required with sendInitialEvents, as is NotOlderThan; no resourceVersion: a consistent state
    assert streaming == {"watch": "1", "timeoutSeconds": 300, "allowWatchBookmarks": "true",
                         "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
    assert "sendInitialEvents" not in watch_query(timeout_s=5, field_selector="spec.nodeName=n")


def _bookmark(rv: str, end: bool) -> WatchEvent:
    annotations = {INITIAL_EVENTS_END: "true"} if end else {}
    return WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": rv, "annotations": annotations}}, 0.0)


def test_only_the_annotated_bookmark_ends_the_initial_events() -> None:
    assert ends_initial_events(_bookmark("9", end=True))
    assert not ends_initial_events(_bookmark("9", end=False))
    added = WatchEvent("ADDED", {"metadata": {"annotations": {INITIAL_EVENTS_END: "true"}}}, 0.0)
    assert not ends_initial_events(added)  # an object that carries the annotation is not the end of anything


def test_sync_clock_times_from_the_first_cut_and_from_the_attempt_that_succeeded() -> None:
    clock = SyncClock()
    clock.received(999)
    assert clock.synced(5.0) is None  # never out of sync: its first sync is not a recovery
    clock.cut(10.0)
    clock.attempt(10.5)  # failed (connection refused), backed off
    clock.cut(11.0)  # a second cut while out of sync: still out since 10.0
    clock.attempt(14.0)
    clock.received(1_000)
    clock.received(500)
    assert clock.synced(15.5) == (5.5, 1.5, 1_500)
    assert clock.synced(16.0) is None  # in sync again: nothing more to time
    clock.attempt(20.0)
    clock.cut(21.0)  # an attempt before the cut does not count: from the cut
    assert clock.synced(22.0) == (1.0, 1.0, 0)


class Counted(FakeStream):
    """A scripted stream that counts its bytes as a transport does (each event 100 bytes)."""

    def __init__(self, events: list[WatchEvent], end: Exception | None = None, rv: str = "") -> None:
        super().__init__(events, end, rv)
        self.bytes = 0

    def __iter__(self) -> Any:
        for found in self._events:
            self.bytes += 100
            yield found
        if self._end:
            raise self._end


def _informer(api: FakeApi, now: list[float], synced: list[tuple[float, float, int]], *,
              watch_list: bool) -> Reflector:
    names = informer_names(scenario_params({"informers": {"watch_list": watch_list}})["informers"])
    original = api.watch

    def watch(*args: Any, **kwargs: Any) -> Any:
        stream = original(*args, **kwargs)
        if stream is not None:
            stream.opened_at = now[0]
            now[0] += 30.0  # each watch ends 30 s later, long before its timeout: cut (its apiserver restarted)
        return stream

    api.watch = watch  # type: ignore[method-assign]
    return Reflector(api, "pods", names, watch_list=watch_list, relist_on_cut=True,  # type: ignore[arg-type]
                     backoff=Backoff(sleep=lambda _s: None), clock=lambda: now[0],
                     on_synced=lambda *found: synced.append(found))


def test_a_watch_list_informer_is_in_sync_at_the_bookmark_and_starts_over_after_a_cut() -> None:
    state = [event("ADDED", "101"), event("ADDED", "102"), _bookmark("150", end=True)]
    api = FakeApi([Counted([*state, event("MODIFIED", "151")], rv="151"),
                   Counted([event("ADDED", "160")], rv="160"),  # cut before its state was whole
                   Counted([*state, event("MODIFIED", "170")], rv="170")])
    now, synced = [0.0], []
    informer = _informer(api, now, synced, watch_list=True)
    for _ in range(3):
        informer.step()
    assert [call[0] for call in api.calls] == ["WATCH"] * 3  # no LIST: the state comes by the watch
    assert api.initial_events == [True, True, True]  # each start over asked for the state, from "" (consistent)
    assert [call[2] for call in api.calls] == ["", "", ""]
    assert synced == [(60.0, 30.0, 100 + 300)]  # out of sync from the first cut; the cut stream's bytes count too
    assert informer.sync.cut_at == 90.0 and informer.resource_version is None  # cut again: starts over next


def test_a_listing_informer_is_in_sync_when_its_list_returns_and_resumes_without_relist_on_cut() -> None:
    api = FakeApi([Counted([event("ADDED", "101")], rv="101"), Counted([event("ADDED", "102")], rv="102")])
    now, synced = [0.0], []
    informer = _informer(api, now, synced, watch_list=False)
    informer.step()
    informer.step()  # after the cut: a consistent LIST (10 bytes in the fake), then its watch
    assert api.calls == [("LIST", "LIST pods (informer, rv=0)", "0"), ("WATCH", "WATCH pods (informer)", "100"),
                         ("LIST", "LIST pods (informer, consistent)", ""),
                         ("WATCH", "WATCH pods (informer, rewatch)", "100")]
    assert api.initial_events == [False, False]
    assert synced == [(0.0, 0.0, 10)]  # the LIST returned at once on the fake clock
    resumed = FakeApi([Counted([event("ADDED", "7")], rv="7"), Counted([], rv="7")])
    kept = Reflector(resumed, "pods", informer_names(scenario_params({"informers": {}})["informers"]),
                     backoff=Backoff(sleep=lambda _s: None), clock=lambda: 0.0)  # type: ignore[arg-type]
    kept.step()
    kept.step()
    assert [call[0] for call in resumed.calls] == ["LIST", "WATCH", "WATCH"]  # resumed from its resourceVersion


def test_informers_count_what_they_received_and_name_their_sync_rows_alike_in_both_modes() -> None:
    listing = scenario_params({"informers": {}})["informers"]
    streaming = scenario_params({"informers": {"watch_list": True}})["informers"]
    assert informer_sync_names(listing) == informer_sync_names(streaming)
    assert informer_names(streaming).first == "WATCH pods (informer, watch-list)"
    names = informer_names(listing)

    def row(kind: str, name: str, count: int, nbytes: int) -> ClientStat:
        return ClientStat(kind, name, count, 0, 0.0, None, None, None, None, content_bytes=nbytes)

    client = [row("WATCH", names.first, 4, 0), row("RECV", f"{names.first} events", 30, 3_000),
              row("LIST", names.relist.first, 4, 40_000), row("LIST", names.relist.more, 4, 20_000),  # type: ignore[union-attr]
              row(SYNCED, informer_sync_names(listing)[0], 4, 60_000)]
    (rate,) = achieved_rates({"informers": {}}, 10, 20.0, client)
    assert (rate.achieved_per_s, rate.events, rate.received_bytes) == (4.0, 30, 63_000)


def test_a_restart_is_a_step_field_of_local_control_planes_only_and_within_the_window() -> None:
    def plan(step: dict[str, Any], target: dict[str, Any] | None = None) -> plan_mod.Plan:
        return plan_mod.parse({"name": "p", "target": target or {}, "steps": [step],
                               "load": {"scenarios": {"informers": {}}}}, "p.yaml")

    found = plan({"nodes": 5, "duration_s": 20, "restart_apiserver_at_s": 3})
    assert found.steps[0].restart_apiserver_at_s == 3
    assert found.to_dict()["steps"][0]["restart_apiserver_at_s"] == 3
    plain = plan({"nodes": 5, "duration_s": 20})
    # a plan without a restart, and informers that list and resume, are written as before (the same digest)
    assert "restart_apiserver_at_s" not in plain.to_dict()["steps"][0]
    assert set(plain.to_dict()["load"]["informers"]) == {"count", "resource", "namespace"}
    with pytest.raises(PlanError, match=r"steps\[0\].restart_apiserver_at_s: must be within the window"):
        plan({"nodes": 5, "duration_s": 20, "restart_apiserver_at_s": 20})
    with pytest.raises(PlanError, match=r"restart_apiserver_at_s: must be a number >= 0"):
        plan({"nodes": 5, "restart_apiserver_at_s": -1})
    with pytest.raises(PlanError, match=r"steps\[0\].restart_apiserver_at_s: only a local control plane"):
        plan({"nodes": 5, "restart_apiserver_at_s": 3}, {"kind": "cluster", "kubeconfig": "/k"})


class FakePlane:
    """Replaces an instance at once, handing out new pids (this process's, so its peak RSS can be read)."""

    def __init__(self) -> None:
        self.replaced: list[tuple[str, str]] = []

    def replace(self, instance: str, bins: Binaries) -> Replacement:
        self.replaced.append((instance, bins.kube_version))
        return Replacement(instance, stop_s=0.5, start_to_ready_s=2.0, back_s=0.0, pid=os.getpid())

    def health_checks(self) -> list[HealthCheck]:
        return [HealthCheck("kube-apiserver", lambda: None)]


class FakeWatch:
    def __init__(self) -> None:
        self.told: list[str] = []

    def pause(self, component: str) -> None:
        self.told.append(f"pause {component}")

    def resume(self, check: HealthCheck) -> None:
        self.told.append(f"resume {check.component}")


def _bins(version: str) -> Binaries:
    path = Path("/nonexistent")
    return Binaries(kube_version=version, etcd=path, kube_apiserver=path, kube_scheduler=path,
                    kube_controller_manager=path, kwok=path, kwokctl=path)


def test_a_restart_is_the_rolling_upgrades_move_onto_the_same_version_for_the_apiservers_only() -> None:
    topology = Topology(apiservers=2, schedulers=2)
    request = restart_request(0, _bins("v1.37.2"))
    assert request.restart and request.label == "apiserver restart"
    assert roll_order(topology, components=request.components) == ["kube-apiserver", "kube-apiserver-2"]
    plane, watch, said, added = FakePlane(), FakeWatch(), [], []
    done = threading.Event()

    def replaced(instance: str, pid: int) -> None:
        added.append((instance, pid))
        done.set()

    restart = RollingUpgrade(request, Roll(steady_s=0.0, pause_s=0.0), Topology(), plane, watch, None,
                             say=said.append, on_replaced=replaced, clock=lambda: 100.0)
    restart.start(window_opened=100.0)
    assert done.wait(10)
    result = restart.finish()
    assert plane.replaced == [("kube-apiserver", "v1.37.2")]
    assert watch.told == ["pause kube-apiserver", "resume kube-apiserver"]  # the stop is no fault
    assert added == [("kube-apiserver", os.getpid())]
    (mark,) = result.marks
    assert (mark.stop_s, mark.start_to_ready_s) == (0.5, 2.0)
    assert mark.peak_rss_bytes is not None and 0 < mark.peak_rss_bytes <= (peak_rss_bytes(os.getpid()) or 0)
    # no availability probe, no roll thresholds, no note about etcd's version: it is not an upgrade
    assert (result.probe, result.seconds, result.thresholds, result.notes, result.error) == ("", [], {}, [], None)
    assert said[-1].startswith("apiserver restart done: 1 instances replaced")


def test_the_kernels_peak_rss_is_read_and_a_gone_process_has_none() -> None:
    peak = peak_rss_bytes(os.getpid())
    assert peak is not None and peak > 1 << 20
    assert peak_rss_bytes(2**22 + 12345) is None  # above the kernel's pid limit: no such process


def test_the_restart_note_says_how_many_informers_were_back_in_sync() -> None:
    params = scenario_params({"informers": {"count": 4}})
    cut, sync, _ = informer_sync_names(params["informers"])
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=1, started_at="t", duration_s=14.0)
    step.restart = RollResult("v1.37.2", "v1.37.2", started_at_s=3.0, marks=[
        RollMark("kube-apiserver", "v1.37.2", 3.0, 6.5, 6.5, stop_s=1.1, start_to_ready_s=2.4)])
    step.client = [ClientStat(SYNCED, cut, 3, 0, 0.0, None, None, None, 3463.7),
                   ClientStat(SYNCED, sync, 3, 0, 0.0, None, None, None, 1383.3)]
    first, informers = restart_notes(step, params)
    assert first == "apiserver restart: kube-apiserver stopped at 3 s into the window, in 1.10 s, ready 2.40 s after " \
                    "its start"
    assert informers.startswith("informers after the restart: 3 of 4 in sync again before the window closed, the "
                                "slowest 3.46 s after its watch was cut (the slowest sync itself 1.38 s)")
    assert informers.endswith("the times are the slowest of 3, not of all")
    assert restart_notes(StepResult(index=0, name="s", nodes=1, pods_per_node=1, started_at="t", duration_s=1.0),
                         params) == []


def test_an_informer_cut_again_after_its_sync_is_counted_apart_from_the_restarts_recovery() -> None:
    params = scenario_params({"informers": {"count": 2}})
    names = informer_sync_names(params["informers"])
    # each informer's return from the restart's cut, then a watch of the first cut again once it was in sync
    assert names.rows(1, 2.0, 0.5, 1000) == [(names.cut, 2000.0, 1000), (names.sync, 500.0, 0)]
    assert names.rows(2, 4.0, 2.0, 900) == [(names.again, 4000.0, 900)]
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=1, started_at="t", duration_s=14.0)
    step.restart = RollResult("v1.37.2", "v1.37.2", started_at_s=3.0, marks=[])
    step.client = [ClientStat(SYNCED, names.cut, 2, 0, 0.0, None, None, None, 3000.0),
                   ClientStat(SYNCED, names.again, 1, 0, 0.0, None, None, None, 4000.0)]
    line = restart_notes(step, params)[1]
    assert line.startswith("informers after the restart: 2 of 2 in sync again before the window closed"), line
    assert line.endswith("; 1 more times an informer back in sync had its watch cut again and synced again (the "
                         "slowest 4.00 s after that cut)"), line


PAGE = """# TYPE etcd_requests_total counter
etcd_requests_total{{group="",operation="list",resource="pods"}} {lists}
etcd_requests_total{{group="",operation="create",resource="pods"}} 200
# TYPE go_memstats_heap_sys_bytes gauge
go_memstats_heap_sys_bytes 2.1e+08
"""


def test_a_restarted_apiservers_counters_are_read_whole_at_the_windows_close(tmp_path: Path) -> None:
    for which, lists in (("start", 40), ("end", 1)):  # the end page is the restarted apiserver's: it counts anew
        path = scrape_path(tmp_path, "apiserver", which)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(PAGE.format(lists=lists).encode()))
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=1, started_at="t", duration_s=14.0)

    def read(**spec: Any) -> float | None:
        return scrape_reading(step, tmp_path, {"page": "apiserver", **spec})[0]

    assert read(metric="etcd_requests_total", stat="total", labels={"operation": "list", "resource": "pods"}) == 1
    # the family is on the page and no series of these labels: that counter counted nothing since the start
    assert read(metric="etcd_requests_total", stat="total", labels={"operation": "delete", "resource": "pods"}) == 0
    assert read(metric="apiserver_storage_list_total", stat="total") is None  # not on the page: not measured
    assert read(metric="go_memstats_heap_sys_bytes", stat="end") == 2.1e8


def test_the_lesson_measures_both_setups_and_sets_its_effect_against_the_reports_ratio() -> None:
    storm = lesson_mod.load("relist-storm")
    warned, fix = storm.variants
    assert (warned.role, fix.role, fix.min_kube_version) == ("warned", "fix", "v1.32.0")
    small = {v.name: storm.plan(v, "small") for v in storm.variants}
    for plan in small.values():
        (step,) = plan.steps
        assert step.restart_apiserver_at_s is not None and step.restart_apiserver_at_s < step.duration_s
        assert plan.load["informers"]["relist_on_cut"] and plan.load["informers"]["count"] >= 20
    assert [small[name].load["informers"]["watch_list"] for name in ("list-watch", "watch-list")] == [False, True]
    medium = storm.plan(warned, "medium")
    assert medium.load["informers"]["count"] >= 50 and medium.steps[0].nodes >= 200 and medium.workers == 2
    assert storm.field_report.ratio == pytest.approx(10.0)
    assert storm.deciding.name == storm.field_report.figure["measure"] == "restarted kube-apiserver peak RSS"
    found = compare_variants(storm.deciding, [330e6], [300e6], "watch-list")
    line = against_report(storm, [found])
    assert line == "18.6 GiB against 1.9 GiB in the report, ×10.00; here (restarted kube-apiserver peak RSS): " \
                   "against watch-list ×1.10 (single run)"
    data = {**_minimal_lesson(), "field_report": {"said": "x", "source": "y", "figure": {"measure": "nothing"}}}
    with pytest.raises(PlanError, match="field_report.figure.measure: names no measure of the lesson"):
        lesson_mod.parse(data, "tiny.yaml")
    assert in_unit(3463.7, "ms") == "3.46 s"


def _minimal_lesson() -> dict[str, Any]:
    return {
        "name": "tiny", "title": "t", "summary": "s", "field_report": {"said": "x", "source": "y"},
        "base": {"load": {"scenarios": {"pod_churn": {"rate": 1}}}},
        "scales": {"small": {"steps": [{"nodes": 5}]}, "medium": {"steps": [{"nodes": 50}]}},
        "variants": [{"name": "bad", "role": "warned", "says": "a"}, {"name": "good", "role": "fix", "says": "b"}],
        "effect": {"measures": [{"name": "m", "source": "s", "figure": "etcd.db_size_bytes"}]},
    }
