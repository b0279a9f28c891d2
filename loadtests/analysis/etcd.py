"""etcd over a step, from its /metrics pages (live or kept): database size against its quota, key count,
disk latency (fsync bounds write latency).

Read from etcd's own /metrics where we can reach it; otherwise the apiserver's view of the database size is
the only figure left, and `source` says so.
"""

from __future__ import annotations

from loadtests.analysis.metrics import INSTANCE, Quantile, Snapshot, histogram_delta
from loadtests.analysis.server import STORAGE_SIZE
from loadtests.results.etcd import EtcdMember, EtcdStats

WAL_FSYNC = "etcd_disk_wal_fsync_duration_seconds"
BACKEND_COMMIT = "etcd_disk_backend_commit_duration_seconds"
GAUGES = {  # EtcdStats field -> metric, at the end of the step
    "db_size_bytes": "etcd_mvcc_db_total_size_in_bytes",
    "db_size_in_use_bytes": "etcd_mvcc_db_total_size_in_use_in_bytes",
    "keys_total": "etcd_debugging_mvcc_keys_total",
    "quota_bytes": "etcd_server_quota_backend_bytes",
}
IS_LEADER = "etcd_server_is_leader"
FAMILIES = frozenset({*GAUGES.values(), WAL_FSYNC, BACKEND_COMMIT, IS_LEADER})  # all this module reads from etcd
SOURCE_ETCD = "etcd /metrics"
SOURCE_APISERVER = "apiserver_storage_size_bytes (etcd /metrics not reachable)"


LATENCIES = {"wal_fsync_p99_s": WAL_FSYNC, "backend_commit_p99_s": BACKEND_COMMIT}  # EtcdStats field -> histogram


def _p99(start: Snapshot | None, end: Snapshot, name: str, **match: str) -> Quantile:
    delta = histogram_delta(start, end, name, **match)
    return delta.p99() if delta is not None else Quantile(None)


def etcd_stats(start: Snapshot | None, end: Snapshot) -> EtcdStats:
    """Sizes at the end of the step; disk latency p99 from the histograms' increase over the step, as a bound
    where the histogram gives no more (a p99 in etcd's first bucket is "< 1 ms", not an interpolated 990 µs).

    Without a start scrape the p99 covers etcd's whole life, which is still a fair upper bound.
    """
    latencies = {field: _p99(start, end, metric) for field, metric in LATENCIES.items()}
    return EtcdStats(
        **{field: end.shared_total(metric) for field, metric in GAUGES.items()},
        **{field: quantile.honest for field, quantile in latencies.items()},
        bounds={field: quantile.bound for field, quantile in latencies.items() if quantile.bound},
        source=SOURCE_ETCD, members=members(start, end),
    )


def members(start: Snapshot | None, end: Snapshot) -> dict[str, EtcdMember]:
    """Each member's figures, where the page is several members' merged (analysis/metrics.merge_pages)."""
    names = sorted({dict(labels).get(INSTANCE, "") for labels, _ in end.series(GAUGES["db_size_bytes"])} - {""})
    found = {}
    for name in names:
        latencies = {field: _p99(start, end, metric, **{INSTANCE: name}) for field, metric in LATENCIES.items()}
        leader = end.total(IS_LEADER, **{INSTANCE: name})
        found[name] = EtcdMember(
            leader=None if leader is None else leader > 0,
            db_size_bytes=end.total(GAUGES["db_size_bytes"], **{INSTANCE: name}),
            **{field: quantile.honest for field, quantile in latencies.items()},
            bounds={field: quantile.bound for field, quantile in latencies.items() if quantile.bound})
    return found


def etcd_stats_from_apiserver(end: Snapshot) -> EtcdStats:
    """For clusters whose etcd we cannot reach: the database size the apiserver reports (summed over clusters,
    e.g. when events live in their own etcd)."""
    return EtcdStats(db_size_bytes=end.shared_total(STORAGE_SIZE), source=SOURCE_APISERVER)
