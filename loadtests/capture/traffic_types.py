"""The traffic section of a profile, one typed shape whether it came from an audit log or from two /metrics
scrapes: what a source cannot say is None ("not measured" in the profile), never 0.

Nothing here holds a name of the cluster's: resources, verbs, codes and the user agents' products (a program's
name: kubelet, an operator's) are kept; users, service accounts and namespaces appear only as salted hashes,
where counting per identity needs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loadtests.capture.sketch import Quantiles

NOT_MEASURED = "not measured"
UNKNOWN = "unknown"
# subresources whose requests are streams into a container or a node, not API objects: no fake node serves them
STREAMS = frozenset({"exec", "attach", "portforward", "proxy", "log"})
# API groups an aggregated apiserver serves (an APIService with a service), not the kube-apiserver: the ones
# clusters commonly run; a group outside this list is taken as served by the kube-apiserver
AGGREGATED_GROUPS = frozenset({"metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io",
                               "packages.operators.coreos.com"})
NOT_VISIBLE = ("admission webhooks: the apiserver's calls to them are in no audit log and no request metric; "
               "a replay without the webhooks leaves their latency out")


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass(frozen=True)
class Window:
    """When the traffic was seen: the first and last event's stageTimestamp (ISO, UTC), or only a length."""

    start: str | None
    end: str | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class StartUp:
    """The source cluster's own start at the head of its audit log, left out of the window so that a class's
    rate is the one it keeps (traffic.start_up says the rule): from the log's first event to its end, the
    requests it held; start and end None where the log holds no start, `why` saying so. `requests_after`: those
    after the window's end, where it ends at the nodes' last Lease renewal (None: it ends at the log's end)."""

    start: str | None
    end: str | None
    seconds: float
    requests: int
    why: str
    requests_after: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "seconds": round(self.seconds, 3), "requests": self.requests,
                "requests_after": self.requests_after, "why": self.why}


@dataclass(frozen=True)
class Rounds:
    """A given window (a run's, traffic.traffic_from_audit's `between`) cut to whole renewal periods of its nodes'
    Leases, so that a round of renewals counts once whatever the window's length: the seconds given and kept (the
    rates' window), the period (None: no node Lease renewed in the window, or it is shorter than a period: kept
    whole) and how many periods, and why in words."""

    given_s: float
    kept_s: float
    period_s: float | None
    periods: int
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"given_seconds": round(self.given_s, 3), "kept_seconds": round(self.kept_s, 3),
                "period_seconds": None if self.period_s is None else round(self.period_s, 3),
                "periods": self.periods, "why": self.why}


@dataclass(frozen=True)
class RequestRate:
    """Requests of one kind per second over the window. `path` names a request to no resource (discovery,
    /healthz) by its first segments; `component` is the metrics' (the audit log does not say it), `client_class`
    and `product` the audit log's (the metrics do not say them)."""

    verb: str
    group: str
    resource: str
    subresource: str
    scope: str
    client_class: str | None
    product: str | None
    code: int | None
    count: int
    per_second: float | None
    component: str | None = None
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in ("verb", "group", "resource", "subresource", "scope",
                                                    "client_class", "product", "component", "code", "count")}
        out["per_second"] = None if self.per_second is None else round(self.per_second, 6)
        if self.path is not None:
            out["path"] = self.path
        return out


@dataclass(frozen=True)
class RequestShape:
    """How one client class LISTs (or WATCHes) one resource: shares of its requests (0 to 1) by resourceVersion
    (unset, "0": from the watch cache; another: a consistent read or a resume), with a limit and which, a
    continue token, a label selector, a field selector and on which fields (the keys, never the values)."""

    verb: str
    client_class: str
    group: str
    resource: str
    count: int
    resource_version: Mapping[str, float]
    continued: float
    with_limit: float
    limit: Quantiles | None
    label_selector: float
    field_selector: float
    field_keys: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"verb": self.verb, "client_class": self.client_class, "group": self.group,
                "resource": self.resource, "count": self.count, "resource_version": dict(self.resource_version),
                "continued": self.continued, "with_limit": self.with_limit,
                "limit": None if self.limit is None else self.limit.to_dict(0),
                "label_selector": self.label_selector, "field_selector": self.field_selector,
                "field_keys": dict(self.field_keys)}


@dataclass(frozen=True)
class WatchLoad:
    """Watches of one resource held by one client class and product: at most and on average at once over the
    window, how many were open at its start and end, how many opened, and how long those that ended lived."""

    group: str
    resource: str
    client_class: str | None
    product: str | None
    max_open: int | None
    mean_open: float | None
    open_at_start: int | None
    open_at_end: int | None
    opened: int | None
    lifetime_s: Quantiles | None

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "resource": self.resource, "client_class": self.client_class,
                "product": self.product, "max_open": self.max_open,
                "mean_open": None if self.mean_open is None else round(self.mean_open, 3),
                "open_at_start": self.open_at_start, "open_at_end": self.open_at_end, "opened": self.opened,
                "lifetime_s": NOT_MEASURED if self.lifetime_s is None else self.lifetime_s.to_dict(3)}


@dataclass(frozen=True)
class Minute:
    """Requests in one clock minute of the window (the first and last are partial), in all and per verb."""

    minute: int  # since the window's first minute
    start: str
    total: int
    verbs: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"minute": self.minute, "start": self.start, "total": self.total, "verbs": dict(self.verbs)}


@dataclass(frozen=True)
class Latency:
    """The apiserver's time on requests of one kind as its audit log saw them (stageTimestamp of ResponseComplete
    less requestReceivedTimestamp): webhooks and flow-control queueing included."""

    verb: str
    group: str
    resource: str
    subresource: str
    scope: str
    seconds: Quantiles

    def to_dict(self) -> dict[str, Any]:
        return {"verb": self.verb, "group": self.group, "resource": self.resource,
                "subresource": self.subresource, "scope": self.scope, "seconds": self.seconds.to_dict(6)}


@dataclass(frozen=True)
class Identities:
    """How many distinct users of one class and product sent requests; for service accounts and users, the
    requests of the busiest ones by salted hash (a node or a control-plane component is interchangeable)."""

    client_class: str
    product: str
    distinct: int
    requests: int
    busiest: Mapping[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"client_class": self.client_class, "product": self.product,
                               "distinct": self.distinct, "requests": self.requests}
        if self.busiest is not None:
            out["busiest"] = dict(self.busiest)
        return out


@dataclass(frozen=True)
class NotReplayable:
    """Requests a replay on fake nodes cannot make, and their share of all requests."""

    what: str
    requests: int
    share: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "requests": self.requests, "share": self.share}


def not_replayable(rates: Iterable[RequestRate],
                   aggregated: frozenset[str] = AGGREGATED_GROUPS) -> list[NotReplayable]:
    """Streams into containers and nodes (exec, attach, port-forward, proxy, logs) and aggregated APIs, by count."""
    total = 0
    found: dict[str, int] = {}
    for rate in rates:
        total += rate.count
        if rate.subresource in STREAMS or rate.verb == "connect":
            what = f"{rate.resource}/{rate.subresource}" if rate.subresource else f"{rate.resource} (connect)"
        elif rate.group in aggregated:
            what = f"aggregated API {rate.group}"
        else:
            continue
        found[what] = found.get(what, 0) + rate.count
    return [NotReplayable(what, n, _share(n, total))
            for what, n in sorted(found.items(), key=lambda item: (-item[1], item[0]))]


@dataclass
class TrafficProfile:
    """A cluster's API traffic over a window, from an audit log or from two /metrics scrapes (`source`)."""

    source: str
    window: Window
    requests: int
    rates: list[RequestRate]
    watches: list[WatchLoad]
    not_replayable: list[NotReplayable]
    client_classes: list[str] | None  # None: unknown (the metrics do not say who sent a request)
    shapes: list[RequestShape] | None = None
    per_minute: list[Minute] | None = None
    latencies: list[Latency] | None = None
    identities: list[Identities] | None = None
    aggregated_groups: frozenset[str] = AGGREGATED_GROUPS
    notes: list[str] = field(default_factory=list)
    start_up: StartUp | None = None  # an audit log's only
    rounds: Rounds | None = None  # an audit log's given window's only

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts, lists, numbers and strings, for the profile's `traffic:` section."""
        def rows(items: list[Any] | None) -> list[dict[str, Any]] | str:
            return NOT_MEASURED if items is None else [item.to_dict() for item in items]

        unplayable = sum(item.requests for item in self.not_replayable)
        per_second = self.requests / self.window.seconds if self.window.seconds > 0 else None
        return {
            "source": self.source, "window": self.window.to_dict(),
            **({} if self.start_up is None else {"start_up": self.start_up.to_dict()}),
            **({} if self.rounds is None else {"rounds": self.rounds.to_dict()}), "requests": self.requests,
            "per_second": None if per_second is None else round(per_second, 6),
            "client_classes": UNKNOWN if self.client_classes is None else list(self.client_classes),
            "rates": rows(self.rates), "request_shapes": rows(self.shapes), "watches": rows(self.watches),
            "per_minute": rows(self.per_minute), "latencies": rows(self.latencies),
            "identities": rows(self.identities),
            "not_replayable": {"requests": unplayable, "share": _share(unplayable, self.requests),
                               "kinds": rows(self.not_replayable),
                               "aggregated_groups_known": sorted(self.aggregated_groups),
                               "not_visible": [NOT_VISIBLE]},
            "notes": list(self.notes),
        }
