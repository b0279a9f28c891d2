"""etcd's section of a step (its /metrics at the window's edges, and the main member asked at its close).

Step keys (results.json), sizes in bytes, latencies in seconds:

    etcd: EtcdStats: db_size_bytes, db_size_in_use_bytes, keys_total, quota_bytes, fsync/commit p99 (bounds:
        "<" or ">" per p99 that is only a histogram bound), alarms and keys_by_prefix (asked of the main
        member), members: each member's figures by name (an etcd of several)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EtcdMember:
    """One member of an etcd cluster of several over a step (its own /metrics): whether it led at the window's
    close, its copy of the database, its disk's latency."""

    leader: bool | None = None
    db_size_bytes: float | None = None
    wal_fsync_p99_s: float | None = None
    backend_commit_p99_s: float | None = None
    bounds: dict[str, str] = field(default_factory=dict)  # "<" or ">" per p99 that is only a histogram bound

@dataclass
class EtcdStats:
    source: str = "etcd /metrics"
    db_size_bytes: float | None = None
    db_size_in_use_bytes: float | None = None
    keys_total: float | None = None
    quota_bytes: float | None = None
    wal_fsync_p99_s: float | None = None
    backend_commit_p99_s: float | None = None
    # "<" or ">" per p99 above that is only a histogram bound (the first bucket's top, the highest finite bound)
    bounds: dict[str, str] = field(default_factory=dict)
    # asked of the main etcd itself at the window's close (local control planes): its raised alarms
    # (e.g. NOSPACE) and its keys per prefix ({"events": n, "pods": n, "leases": n})
    alarms: list[str] = field(default_factory=list)
    keys_by_prefix: dict[str, int] = field(default_factory=dict)
    # an etcd of several members: each one's figures by member name (the figures above are the cluster's: its
    # database as the largest member holds it, every member's fsyncs and commits together)
    members: dict[str, EtcdMember] = field(default_factory=dict)

@dataclass
class EtcdSection:
    """etcd's part of a step (an empty EtcdStats: not measured)."""

    etcd: EtcdStats = field(default_factory=EtcdStats)
