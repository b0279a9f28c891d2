"""apiserver figures of a step from two recorded /metrics scrapes (values worked out by hand from the fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.analysis import server as apiserver
from loadtests.analysis.metrics import Snapshot
from loadtests.results.apiserver import ServerLatency

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def start() -> Snapshot:
    return Snapshot.parse((DATA / "apiserver_metrics_start.txt").read_text())


@pytest.fixture(scope="module")
def end() -> Snapshot:
    return Snapshot.parse((DATA / "apiserver_metrics_end.txt").read_text())


def by_key(latencies: list[ServerLatency]) -> dict[tuple[str, str, str, str], ServerLatency]:
    return {(s.verb, s.resource, s.subresource, s.scope): s for s in latencies}


class TestServerLatency:
    def test_one_entry_per_verb_and_resource_with_requests_in_the_step(self, start: Snapshot,
                                                                        end: Snapshot) -> None:
        found = by_key(apiserver.server_latencies(start, end))
        assert set(found) == {
            ("POST", "pods", "", "resource"),
            ("LIST", "pods", "", "namespace"),
            ("DELETE", "pods", "", "resource"),
            ("PATCH", "pods", "status", "resource"),
            ("LIST", "events", "", "cluster"),
            ("PUT", "leases", "", "resource"),
            ("POST", "configmaps", "", "resource"),  # first seen during the step
        }  # no WATCH (streaming), no GET nodes (no request during the step), no GET /healthz (not an API call)
        assert all(s.metric == "apiserver_request_sli_duration_seconds" for s in found.values())
        assert found[("PUT", "leases", "", "resource")].group == "coordination.k8s.io"

    def test_quantiles_interpolate_the_step_delta(self, start: Snapshot, end: Snapshot) -> None:
        found = by_key(apiserver.server_latencies(start, end))
        post = found[("POST", "pods", "", "resource")]
        # step delta: 150 <= 0.05, 40 in (0.05, 0.1], 8 in (0.1, 0.2], 2 in (0.2, 0.4]
        assert post.count == 200
        # the median sits in the first bucket: all the histogram says is "under 50 ms", not 33.3 ms
        assert post.p50 == pytest.approx(0.05) and post.bounds == {"p50": "<"}
        # the finer-bucketed histogram of the same requests does say more (its buckets: 5 ms, 25 ms, 50 ms)
        assert post.finer["metric"] == "apiserver_request_duration_seconds" and post.finer["bounds"] == {}
        assert 0.025 < post.finer["p50"] < 0.05
        assert post.p90 == pytest.approx(0.05 + 0.05 * 30 / 40)
        assert post.p99 == pytest.approx(0.1 + 0.1 * 8 / 8)
        listing = found[("LIST", "pods", "", "namespace")]
        # step delta: 10 in (0.05, 0.1], 20 in (0.1, 0.2], 8 in (0.2, 0.4], 2 in (0.4, 0.6]
        assert listing.count == 40
        assert listing.p50 == pytest.approx(0.15)
        assert listing.p90 == pytest.approx(0.35)
        assert listing.p99 == pytest.approx(0.56)

    def test_slow_requests_beyond_the_last_bucket_report_its_bound(self, start: Snapshot, end: Snapshot) -> None:
        events = by_key(apiserver.server_latencies(start, end))[("LIST", "events", "", "cluster")]
        assert events.count == 10
        assert events.p50 == pytest.approx(45 + 15 * 1 / 2)
        assert events.p90 == 60.0
        assert events.p99 == 60.0
        assert events.bounds == {"p90": ">", "p99": ">"}  # "over 60 s": the rank fell in the +Inf bucket

    def test_falls_back_to_the_full_duration_histogram(self, start: Snapshot, end: Snapshot) -> None:
        def without_sli(snap: Snapshot) -> Snapshot:
            return Snapshot({key: value for key, value in snap.items()
                             if not key[0].startswith(apiserver.SLI_LATENCY)}, snap.taken_at)

        found = by_key(apiserver.server_latencies(without_sli(start), without_sli(end)))
        assert set(found) == {("POST", "pods", "", "resource"), ("LIST", "pods", "", "namespace")}
        post = found[("POST", "pods", "", "resource")]
        assert post.metric == "apiserver_request_duration_seconds"
        # this histogram has 0.005 and 0.025 buckets: 50 <= 0.025, 100 in (0.025, 0.05]
        assert post.p50 == pytest.approx(0.025 + 0.025 * 50 / 100)


def test_requests_by_code_sums_every_verb_and_resource(start: Snapshot, end: Snapshot) -> None:
    # every request counts here, /healthz (60 in the step) included
    assert apiserver.requests_by_code(start, end) == {"200": 1462, "201": 203, "404": 4, "429": 7}


def test_count_requests_sums_codes_and_scopes_for_one_verb_and_resource(start: Snapshot, end: Snapshot) -> None:
    assert apiserver.count_requests(start, end, "POST", "pods") == 207  # 200 created + 7 throttled
    assert apiserver.count_requests(start, end, "post", "pods") == 207
    assert apiserver.count_requests(start, end, "DELETE", "pods") == 154
    assert apiserver.count_requests(start, end, "PATCH", "pods", "status") == 200
    assert apiserver.count_requests(start, end, "PATCH", "pods") == 0  # only the status subresource
    assert apiserver.count_requests(start, end, "GET", "nodes") == 0
    assert apiserver.count_requests(start, end, "GET", "leases") == 500


def test_scalars(start: Snapshot, end: Snapshot) -> None:
    figures = apiserver.apiserver_scalars(start, end)
    assert figures == {
        "watchers": 18,  # WATCH only, not the CONNECT
        "watch_events": 4500,
        "flowcontrol_rejected": 7,  # series absent at the start
        "resident_memory_bytes": 456781824,
        "heap_inuse_bytes": 217083904,
        "cpu_seconds": pytest.approx(33.5),
        "goroutines": 1523,
        "inflight_mutating": 3,
        "inflight_readOnly": 7,
        "lists_from_etcd": 2,
        "lists_from_watchcache": 48,
        "list_fetched_objects_from_etcd": 2400,
        "list_fetched_objects_from_watchcache": 40400,
    }


def test_list_sources_of_older_apiservers() -> None:
    def text(storage: int, cache: int) -> str:
        return ("# HELP apiserver_cache_list_total [ALPHA] Number of LIST requests served from watch cache\n"
                "# TYPE apiserver_cache_list_total counter\n"
                f'apiserver_cache_list_total{{index="",resource_prefix="/pods"}} {cache}\n'
                "# HELP apiserver_storage_list_total [ALPHA] Number of LIST requests served from storage\n"
                "# TYPE apiserver_storage_list_total counter\n"
                f'apiserver_storage_list_total{{resource="pods"}} {storage}\n')

    figures = apiserver.apiserver_scalars(Snapshot.parse(text(3, 10)), Snapshot.parse(text(5, 30)))
    assert figures == {"lists_from_etcd": 2, "lists_from_watchcache": 20}


def test_watch_traffic_in_bytes_is_the_sum_of_the_event_sizes_sent_over_the_step() -> None:
    def page(pods: float, leases: float) -> Snapshot:
        lines = ["# TYPE apiserver_watch_events_sizes histogram"]
        for resource, total in (("pods", pods), ("leases", leases)):
            lines += [f'apiserver_watch_events_sizes_bucket{{group="",resource="{resource}",version="v1",le="1024"}} 1',
                      f'apiserver_watch_events_sizes_bucket{{group="",resource="{resource}",version="v1",le="+Inf"}} 2',
                      f'apiserver_watch_events_sizes_sum{{group="",resource="{resource}",version="v1"}} {total}',
                      f'apiserver_watch_events_sizes_count{{group="",resource="{resource}",version="v1"}} 2']
        return Snapshot.parse("\n".join(lines) + "\n")

    assert apiserver.apiserver_scalars(page(1000, 500), page(4000, 700))["watch_event_bytes"] == 3200
    assert "watch_event_bytes" not in apiserver.apiserver_scalars(None, Snapshot({}))  # absent: not measured


def test_storage_objects(end: Snapshot) -> None:
    assert apiserver.storage_objects(end) == {
        "configmaps": 2, "deployments.apps": 12, "leases.coordination.k8s.io": 105, "nodes": 100, "pods": 1200,
    }  # events: -1 (could not count) is left out
    assert apiserver.storage_objects(Snapshot({})) == {}


def test_storage_objects_of_apiservers_before_1_34() -> None:
    old = Snapshot.parse(
        "# HELP apiserver_storage_objects [STABLE] Number of stored objects at the time of last check split by "
        "kind. In case of a fetching error, the value will be -1.\n"
        "# TYPE apiserver_storage_objects gauge\n"
        'apiserver_storage_objects{resource="deployments.apps"} 3\n'
        'apiserver_storage_objects{resource="events"} -1\n'
        'apiserver_storage_objects{resource="pods"} 30\n')
    assert apiserver.storage_objects(old) == {"deployments.apps": 3, "pods": 30}


def test_the_declared_families_are_all_the_figures_need(start: Snapshot, end: Snapshot) -> None:
    """Scrapes keep only apiserver.FAMILIES: every figure must come out the same from such a scrape."""
    def only(which: str) -> Snapshot:
        return Snapshot.parse((DATA / f"apiserver_metrics_{which}.txt").read_text(), families=apiserver.FAMILIES)

    small_start, small_end = only("start"), only("end")
    assert len(small_end) < len(end)
    assert apiserver.server_latencies(small_start, small_end) == apiserver.server_latencies(start, end)
    assert apiserver.requests_by_code(small_start, small_end) == apiserver.requests_by_code(start, end)
    assert apiserver.apiserver_scalars(small_start, small_end) == apiserver.apiserver_scalars(start, end)
    assert apiserver.storage_objects(small_end) == apiserver.storage_objects(end)
