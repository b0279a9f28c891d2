"""The probes' maths on /metrics recorded from a real kube-apiserver v1.37.2 and etcd v3.6.16.

Recorded around one known action: 10 pods created in one namespace and run to Running by kwok (then trimmed
to the families the probes read). What is asserted is what that action implies, whatever the exact timings.
"""

from __future__ import annotations

import pytest

from loadtests.analysis import etcd
from loadtests.analysis import server as apiserver
from loadtests.analysis.metrics import Snapshot
from tests.checks import recorded

PODS_CREATED = 10


@pytest.fixture(scope="module")
def pair() -> tuple[Snapshot, Snapshot]:
    return recorded("apiserver_v1.37.2_recorded_start.txt"), recorded("apiserver_v1.37.2_recorded_end.txt")


def test_server_counts_match_what_was_done(pair: tuple[Snapshot, Snapshot]) -> None:
    start, end = pair
    assert apiserver.count_requests(start, end, "POST", "pods") == PODS_CREATED
    assert apiserver.count_requests(start, end, "POST", "pods", "binding") == PODS_CREATED  # one per scheduling
    found = {(s.verb, s.resource, s.subresource): s for s in apiserver.server_latencies(start, end)}
    create = found[("POST", "pods", "")]
    assert create.count == PODS_CREATED
    assert create.scope == "resource"  # v1.37 records a create under the name of the object it creates
    assert found[("POST", "pods", "binding")].count == PODS_CREATED


def test_every_latency_entry_is_sane(pair: tuple[Snapshot, Snapshot]) -> None:
    start, end = pair
    entries = apiserver.server_latencies(start, end)
    assert entries
    for entry in entries:
        assert entry.metric == apiserver.SLI_LATENCY
        assert entry.verb not in apiserver.STREAMING_VERBS
        assert entry.resource
        assert entry.count > 0
        assert entry.p50 is not None and entry.p90 is not None and entry.p99 is not None
        assert 0 < entry.p50 <= entry.p90 <= entry.p99 <= 60


def test_codes_and_figures(pair: tuple[Snapshot, Snapshot]) -> None:
    start, end = pair
    codes = apiserver.requests_by_code(start, end)
    assert codes.get("201", 0) >= 2 * PODS_CREATED  # the pods and their bindings, at least
    figures = apiserver.apiserver_scalars(start, end)
    assert figures["watchers"] > 0
    assert figures["watch_events"] >= PODS_CREATED  # the scheduler alone saw every pod created
    assert figures["resident_memory_bytes"] > 50 * 1024**2
    assert figures["cpu_seconds"] > 0
    assert set(figures) >= {"inflight_mutating", "inflight_readOnly", "heap_inuse_bytes", "lists_from_watchcache"}
    objects = apiserver.storage_objects(end)
    assert objects["namespaces"] >= 4  # default, kube-system, kube-public, kube-node-lease at least
    assert "leases.coordination.k8s.io" in objects


def test_etcd_stats() -> None:
    stats = etcd.etcd_stats(recorded("etcd_v3.6.16_recorded_start.txt"), recorded("etcd_v3.6.16_recorded_end.txt"))
    assert stats.quota_bytes == 2 * 1024**3
    assert stats.db_size_bytes is not None and stats.db_size_in_use_bytes is not None
    assert 0 < stats.db_size_in_use_bytes <= stats.db_size_bytes
    assert stats.keys_total and stats.keys_total > 0
    # the step wrote to etcd, so both disk histograms moved; the quantile is inside etcd's buckets
    for p99 in (stats.wal_fsync_p99_s, stats.backend_commit_p99_s):
        assert p99 is not None and 0 < p99 <= 8.192
