"""etcd over a step: database size against its quota, key count, disk latency (fsync bounds write latency).

Read from etcd's own /metrics where we can reach it; otherwise the apiserver's view of the database size is
the only figure left, and `source` says so.
"""

from __future__ import annotations

import base64
import json
import urllib.request

from loadtests.kube.access import ClusterAccess
from loadtests.measure.apiserver import STORAGE_SIZE
from loadtests.measure.prometheus import Snapshot, histogram_delta
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


# Key prefixes counted in etcd at the window's close: what the main etcd holds of each (with Events in their
# own etcd, "events" falls to zero in the main one)
COUNTED_PREFIXES = {"events": "/registry/events/", "pods": "/registry/pods/", "leases": "/registry/leases/"}


def _post(client: ClusterAccess, path: str, body: dict[str, object], timeout_s: float) -> dict[str, object]:
    """One call to etcd's JSON gateway (/v3/...), with the client certificate etcd requires."""
    request = urllib.request.Request(client.server.rstrip("/") + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout_s, context=client.ssl_context()) as response:
        return json.loads(response.read() or b"{}")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _prefix_end(prefix: str) -> str:
    """The range end that covers every key starting with prefix (its last byte plus one)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def alarms(client: ClusterAccess, timeout_s: float = 10.0) -> list[str]:
    """etcd's raised alarms (NOSPACE when the database reached its quota, CORRUPT), one per member."""
    found = _post(client, "/v3/maintenance/alarm", {"action": "GET"}, timeout_s).get("alarms") or []
    return sorted({str(a.get("alarm")) for a in found if isinstance(a, dict) and a.get("alarm")})


def key_counts(client: ClusterAccess, prefixes: dict[str, str] | None = None,
               timeout_s: float = 30.0) -> dict[str, int]:
    """Keys under each prefix, counted by etcd itself (count_only: no value leaves etcd)."""
    counts = {}
    for name, prefix in (prefixes or COUNTED_PREFIXES).items():
        reply = _post(client, "/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix)),
                                               "count_only": True}, timeout_s)
        counts[name] = int(reply.get("count") or 0)
    return counts
