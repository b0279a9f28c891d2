"""The audit log's section of a step (measure/audit.py): who sent the step's requests.

Step keys (results.json):

    audit: who sent the step's requests, from the apiserver's audit log (local control planes with
        auditing on; absent in older files): source, events (requests counted), unreadable (lines that
        did not parse), notes, and
        requests: list of {client, verb, resource, scope, group, count, apiserver_s (summed latency),
            p99_s, codes}; client is the user agent's product, or k8s-loadtest/<part> for the harness's
            own parts (a scenario, fleet, probe-*, health), with the controller's service account beside
            kube-controller-manager; a watch counts when it starts and adds no latency
        slowest: the slowest requests one by one: {client, verb, resource, namespace, name, latency_s,
            code, at_s (since the window opened), user}
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AuditRow:
    """Requests of one client, verb, resource and scope in a step, from the apiserver's audit log."""

    client: str
    verb: str  # as the apiserver's request metrics name it (POST, LIST, WATCH, ...)
    resource: str  # with its subresource, e.g. "nodes/status"
    scope: str  # "resource" | "namespace" | "cluster"
    group: str
    count: int
    apiserver_s: float  # the sum of the requests' latencies (0 for watches: their duration is their life)
    p99_s: float | None
    codes: dict[str, int] = field(default_factory=dict)

@dataclass
class AuditRequest:
    """One of a step's slowest requests, with the client that sent it."""

    client: str
    verb: str
    resource: str
    namespace: str
    name: str
    latency_s: float
    code: str
    at_s: float  # seconds after the measured window opened
    user: str = ""

@dataclass
class AuditSummary:
    """Who sent which requests during a step (empty where no audit log was read)."""

    source: str = ""
    events: int = 0
    unreadable: int = 0
    requests: list[AuditRow] = field(default_factory=list)
    slowest: list[AuditRequest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

@dataclass
class AuditSection:
    """Who sent the step's requests (an empty AuditSummary: no audit log was read)."""

    audit: AuditSummary = field(default_factory=AuditSummary)
