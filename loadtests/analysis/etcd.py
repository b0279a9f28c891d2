"""etcd over a step, from its /metrics pages (live or kept): database size against its quota, key count,
disk latency (fsync bounds write latency).

Read from etcd's own /metrics where we can reach it; otherwise the apiserver's view of the database size is
the only figure left, and `source` says so.
"""

from __future__ import annotations

from loadtests.analysis.metrics import Snapshot, histogram_delta
from loadtests.analysis.server import STORAGE_SIZE
from loadtests.results import EtcdStats

WAL_FSYNC = "etcd_disk_wal_fsync_duration_seconds"
BACKEND_COMMIT = "etcd_disk_backend_commit_duration_seconds"
GAUGES = {  # EtcdStats field -> metric, at the end of the step
    "db_size_bytes": "etcd_mvcc_db_total_size_in_bytes",
    "db_size_in_use_bytes": "etcd_mvcc_db_total_size_in_use_in_bytes",
    "keys_total": "etcd_debugging_mvcc_keys_total",
    "quota_bytes": "etcd_server_quota_backend_bytes",
}
FAMILIES = frozenset({*GAUGES.values(), WAL_FSYNC, BACKEND_COMMIT})  # all this module reads from etcd
SOURCE_ETCD = "etcd /metrics"
SOURCE_APISERVER = "apiserver_storage_size_bytes (etcd /metrics not reachable)"


def _p99(start: Snapshot | None, end: Snapshot, name: str) -> float | None:
    delta = histogram_delta(start, end, name)
    return delta.quantile(0.99) if delta is not None else None


def etcd_stats(start: Snapshot | None, end: Snapshot) -> EtcdStats:
    """Sizes at the end of the step; disk latency p99 from the histograms' increase over the step.

    Without a start scrape the p99 covers etcd's whole life, which is still a fair upper bound.
    """
    return EtcdStats(
        **{field: end.total(metric) for field, metric in GAUGES.items()},
        wal_fsync_p99_s=_p99(start, end, WAL_FSYNC),
        backend_commit_p99_s=_p99(start, end, BACKEND_COMMIT),
        source=SOURCE_ETCD,
    )


def etcd_stats_from_apiserver(end: Snapshot) -> EtcdStats:
    """For clusters whose etcd we cannot reach: the database size the apiserver reports (summed over clusters,
    e.g. when events live in their own etcd)."""
    return EtcdStats(db_size_bytes=end.total(STORAGE_SIZE), source=SOURCE_APISERVER)
