"""What hollow nodes' agents sent, read from the apiserver's audit log and from the agents' own client logs: pure
functions of recorded data. benchmarks/hollow_node.py runs the nodes and writes the results with these;
tests/unit/test_hollow_audit.py feeds them recorded events.

A request is one audit ID: its first event says who sent what (user, groups, user agent, verb, objectRef,
requestURI) and when it arrived; ResponseStarted says a watch was established, ResponseComplete when it ended and
with which code. Requests are counted where they arrived; a watch is "held" at a moment when it had started and
not yet ended. Requests are keyed as the apiserver's request metrics label them: (verb, resource, subresource,
scope)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from loadtests.measure.audit import METRIC_VERBS, client_of, scope_of

KUBELET, PROXY = "kubelet", "kube-proxy"
# the agents by their user agent: kubemark's (fixed in hollow_node.go) and the harness's node agents'
AGENTS = {"hollow-kubelet": KUBELET, "hollow-proxy": PROXY, "k8s-loadtest/node_agents/kubelet": KUBELET,
          "k8s-loadtest/node_agents/kube-proxy": PROXY}
NODE_USER = "system:node:"
EVERY_NODE = "*"  # the proxies share one identity (as kube-proxy's ServiceAccount is shared): not told apart by node
PER_OBJECT = ("configmaps", "secrets")  # the kubelet's per-object watches: metadata.name=<name>

Key = tuple[str, str, str, str]  # verb (as the request metrics say it), resource, subresource, scope


def timestamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@dataclass
class Request:
    """One request as the audit log saw it."""

    audit_id: str
    received: float
    user: str
    groups: tuple[str, ...]
    user_agent: str
    verb: str
    resource: str
    subresource: str
    scope: str
    api_group: str
    namespace: str
    name: str
    uri: str
    started: bool = False  # a watch the apiserver established (its ResponseStarted stage)
    ended: float | None = None
    code: int | None = None

    @property
    def key(self) -> Key:
        return (self.verb, self.resource, self.subresource, self.scope)

    @property
    def agent(self) -> str | None:
        return AGENTS.get(client_of(self.user_agent, self.user))

    @property
    def node(self) -> str:
        return self.user.removeprefix(NODE_USER) if self.user.startswith(NODE_USER) else EVERY_NODE

    def query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.uri).query, keep_blank_values=True).items()}

    @property
    def refused(self) -> bool:
        """Answered with an error (a watch refused by authorization still has a ResponseStarted stage)."""
        return self.code is not None and self.code >= 300

    def held_at(self, moment: float) -> bool:
        return self.verb == "WATCH" and self.started and not self.refused and self.received <= moment and (
            self.ended is None or self.ended > moment)


def _new_request(event: dict[str, Any]) -> Request:
    ref = event.get("objectRef") or {}
    user = event.get("user") or {}
    verb = event.get("verb", "")
    return Request(
        audit_id=event["auditID"], received=timestamp(event["requestReceivedTimestamp"]),
        user=user.get("username", ""), groups=tuple(user.get("groups") or ()), user_agent=event.get("userAgent", ""),
        verb=METRIC_VERBS.get(verb, verb.upper()), resource=ref.get("resource", ""),
        subresource=ref.get("subresource", ""), scope=scope_of(verb, ref.get("namespace", ""), ref.get("name", "")),
        api_group=ref.get("apiGroup", ""), namespace=ref.get("namespace", ""), name=ref.get("name", ""),
        uri=event.get("requestURI", ""))


def requests_of(events: Iterable[dict[str, Any]]) -> list[Request]:
    """Every request of the events, by audit ID, in the order they arrived."""
    found: dict[str, Request] = {}
    for event in events:
        if not event.get("auditID") or not event.get("requestReceivedTimestamp"):
            continue
        request = found.get(event["auditID"])
        if request is None:
            request = found[event["auditID"]] = _new_request(event)
        stage = event.get("stage")
        if stage == "ResponseStarted":
            request.started = True
        elif stage in ("ResponseComplete", "Panic"):
            request.ended = timestamp(event.get("stageTimestamp") or event["requestReceivedTimestamp"])
            request.code = (event.get("responseStatus") or {}).get("code")
    return sorted(found.values(), key=lambda r: r.received)


def read_events(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """The JSON lines of audit logs (rotated files first, as their names sort), skipping a torn last line."""
    for path in paths:
        with path.open("rb") as handle:
            for line in handle:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def is_agents(event: dict[str, Any]) -> bool:
    """An event of a hollow node's agent (by its user agent)."""
    return AGENTS.get(client_of(event.get("userAgent", ""), (event.get("user") or {}).get("username", ""))) is not None


# --- counts and rates -------------------------------------------------------------------------------------------


def agents_requests(requests: Iterable[Request]) -> list[Request]:
    return [r for r in requests if r.agent is not None]


def counts(requests: Iterable[Request], opened: float, closed: float) -> Counter[tuple[str, str, Key]]:
    """Requests of the agents that arrived in [opened, closed), by (agent, node, key)."""
    return Counter((r.agent, r.node, r.key) for r in agents_requests(requests) if opened <= r.received < closed)


def per_node_rates(requests: Iterable[Request], opened: float, closed: float,
                   nodes: list[str]) -> dict[tuple[str, Key], dict[str, float]]:
    """Per (agent, key): requests per minute of each node's kubelet; a proxy's requests are every node's share
    (their sum over the nodes), under EVERY_NODE."""
    minutes = (closed - opened) / 60
    rates: dict[tuple[str, Key], dict[str, float]] = {}
    for (agent, node, key), count in counts(requests, opened, closed).items():
        row = rates.setdefault((agent, key), {})
        share = count / len(nodes) if node == EVERY_NODE else count
        row[node] = row.get(node, 0.0) + share / minutes
    return rates


def per_minute(requests: Iterable[Request], opened: float, closed: float) -> dict[str, list[int]]:
    """Each (agent, node, key)'s count in each whole minute of the window, for the raw record."""
    minutes = max(1, int((closed - opened) // 60))
    series: dict[str, list[int]] = {}
    for r in agents_requests(requests):
        index = int((r.received - opened) // 60)
        if opened <= r.received < closed and index < minutes:
            series.setdefault(" ".join((r.agent or "", r.node, *r.key)), [0] * minutes)[index] += 1
    return series


def codes(requests: Iterable[Request], opened: float, closed: float) -> Counter[tuple[str, Key, int | None]]:
    """Responses other than 2xx of the agents' requests that arrived in [opened, closed)."""
    return Counter((r.agent or "", r.key, r.code) for r in agents_requests(requests)
                   if opened <= r.received < closed and r.refused)


def fallbacks(requests: list[Request]) -> list[tuple[Request, Request | None]]:
    """Each LIST of an agent, with the refused streaming WATCH of the same node, collection and selectors just
    before it, if any: client-go's reflector lists (and then watches from the list's resourceVersion) when its
    streaming list fails."""
    found = []
    for r in agents_requests(requests):
        if r.verb != "LIST":
            continue
        selectors = (r.query().get("fieldSelector"), r.query().get("labelSelector"))
        before = [w for w in agents_requests(requests) if w.verb == "WATCH" and w.refused and w.node == r.node
                  and w.resource == r.resource and w.namespace == r.namespace and w.received <= r.received
                  and (w.query().get("fieldSelector"), w.query().get("labelSelector")) == selectors]
        found.append((r, before[-1] if before else None))
    return found


# --- watches ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchShape:
    agent: str
    resource: str
    api_group: str
    scope: str
    field_selector: str
    label_selector: str
    bookmarks: str
    initial_events: str
    rv_match: str


def shape_of(request: Request) -> WatchShape:
    """A watch's selectors and options from its requestURI, with the node's name as <node> and a per-object
    watch's name as <name>."""
    query = request.query()
    field = query.get("fieldSelector", "")
    if request.node != EVERY_NODE:
        field = field.replace(request.node, "<node>")
    if request.resource in PER_OBJECT:
        field = re.sub(r"metadata\.name=[^,]+", "metadata.name=<name>", field)
    return WatchShape(agent=request.agent or "", resource=request.resource, api_group=request.api_group,
                      scope=request.scope, field_selector=field, label_selector=query.get("labelSelector", ""),
                      bookmarks=query.get("allowWatchBookmarks", ""), initial_events=query.get("sendInitialEvents", ""),
                      rv_match=query.get("resourceVersionMatch", ""))


def held(requests: Iterable[Request], moment: float) -> list[Request]:
    """The agents' watches open at `moment`."""
    return [r for r in agents_requests(requests) if r.held_at(moment)]


def held_by_shape(requests: Iterable[Request], moment: float) -> dict[WatchShape, Counter[str]]:
    """Watches held at `moment` by shape (streaming list or renewal alike: sendInitialEvents left out), each
    shape's count by node (the proxies' under EVERY_NODE)."""
    shapes: dict[WatchShape, Counter[str]] = {}
    for r in held(requests, moment):
        shape = shape_of(r)
        shapes.setdefault(WatchShape(**{**shape.__dict__, "initial_events": "", "rv_match": ""}), Counter())[
            r.node] += 1
    return shapes


def opened_by_shape(requests: Iterable[Request]) -> Counter[WatchShape]:
    """Every watch the agents opened, by its full shape (a streaming list says sendInitialEvents=true)."""
    return Counter(shape_of(r) for r in agents_requests(requests) if r.verb == "WATCH")


def timeouts(requests: Iterable[Request]) -> dict[str, tuple[int, int]]:
    """The smallest and largest timeoutSeconds each watched resource asked for."""
    found: dict[str, list[int]] = {}
    for r in agents_requests(requests):
        value = r.query().get("timeoutSeconds", "")
        if r.verb == "WATCH" and value.isdigit():
            found.setdefault(f"{r.agent} {r.resource}", []).append(int(value))
    return {k: (min(v), max(v)) for k, v in found.items()}


def renewals_due(requests: Iterable[Request], opened: float, closed: float) -> Counter[tuple[str, str, Key]]:
    """Watch renewals the window should hold, from each watch held when it opened: the server ends a watch at its
    own timeoutSeconds, and the reflector opens the next at once. By (agent, node, key)."""
    due: Counter[tuple[str, str, Key]] = Counter()
    for r in held(requests, opened):
        value = r.query().get("timeoutSeconds", "")
        if value.isdigit() and opened <= r.received + int(value) < closed:
            due[(r.agent or "", r.node, r.key)] += 1
    return due


# --- who they are -----------------------------------------------------------------------------------------------


def identities(requests: Iterable[Request]) -> Counter[tuple[str, str, tuple[str, ...], str]]:
    """(agent, user with the node's name as <node>, groups, user agent) -> requests."""
    return Counter((r.agent or "", r.user.replace(r.node, "<node>") if r.node != EVERY_NODE else r.user,
                    r.groups, r.user_agent) for r in agents_requests(requests))


# --- the reference (loadtests/data/node_agents_reference.yaml) -------------------------------------------------


def reference_rates(reference: dict[str, Any], agents: Iterable[str], pods: int, configmaps: int,
                    secrets: int) -> dict[Key, float]:
    """Requests per node per minute in the steady state from the reference's own rows for `agents`: a watch
    re-opened every mean timeout, a periodic request every `every_s` (per pod where it says so)."""
    multiplier = {"node": 1, "pod-configmap": configmaps, "pod-secret": secrets, "pod": pods}
    rates: dict[Key, float] = {}
    for agent in agents:
        entry = reference["agents"][agent]
        for watch in entry["watches"]:
            low, high = watch["timeout_s"]
            key = ("WATCH", watch["resource"], "", watch["scope"])
            rates[key] = rates.get(key, 0.0) + 60 / ((low + high) / 2) * multiplier[watch["per"]]
        for request in entry["requests"]:
            if request.get("every_s"):
                key = (request["verb"], request["resource"], request.get("subresource") or "", request["scope"])
                rates[key] = rates.get(key, 0.0) + 60 / request["every_s"] * multiplier[request.get("per", "node")]
    return rates


def reference_table(reference: dict[str, Any], pods: int, configmaps: int, secrets: int) -> dict[Key, float]:
    """The reference's steady-state table for one real node, its formula evaluated."""
    found: dict[Key, float] = {}
    for row in reference["steady_state_per_node_per_minute"]:
        per_object = configmaps if row["resource"] == "configmaps" else secrets
        key = (row["verb"], row["resource"], row.get("subresource") or "", row["scope"])
        found[key] = row.get("fixed", 0.0) + row.get("per_pod", 0.0) * pods + row.get("per_object", 0.0) * per_object
    return found


# --- what the clients sent and got, from their own logs (client-go's round_trippers at -v 8) --------------------


@dataclass
class ClientHeaders:
    """Headers a client logged: per request (verb, Accept, Content-Type); per response its Audit-Id's
    Content-Type (the audit log says which request that was)."""

    requests: Counter[tuple[str, str, str]]
    responses: dict[str, str]


_LOGGED = re.compile(r'"(Request|Response)"(?: verb="(\w+)")?.*headers=<$')


def client_headers(text: str) -> ClientHeaders:
    """The headers of client-go's "Request" and "Response" lines (klog's text format: `headers=<`, then one
    tab-indented line per header, then ` >`)."""
    requests: Counter[tuple[str, str, str]] = Counter()
    responses: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        found = _LOGGED.search(line)
        if not found:
            continue
        headers: dict[str, str] = {}
        for inner in lines:
            if not inner.startswith("\t"):
                break
            name, _, value = inner.strip().partition(": ")
            headers[name.lower()] = value
        if found.group(1) == "Request":
            requests[(found.group(2) or "", headers.get("accept", ""), headers.get("content-type", ""))] += 1
        elif headers.get("audit-id"):
            responses[headers["audit-id"]] = headers.get("content-type", "")
    return ClientHeaders(requests, responses)


def answered(requests: Iterable[Request], responses: dict[str, str]) -> Counter[tuple[str, str, str, str]]:
    """(agent, verb, resource, response Content-Type) of each audited request whose response the client logged."""
    return Counter((r.agent or "", r.verb, r.resource, responses[r.audit_id])
                   for r in agents_requests(requests) if r.audit_id in responses)


# --- apiserver_request_total against the audit log -------------------------------------------------------------


def metric_totals(samples: Iterable[tuple[dict[str, str], float]]) -> Counter[Key]:
    """apiserver_request_total's 2xx samples summed by (verb, resource, subresource, scope)."""
    totals: Counter[Key] = Counter()
    for labels, value in samples:
        if labels.get("code", "").startswith("2"):
            totals[(labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""),
                    labels.get("scope", ""))] += int(value)
    return totals


def audit_totals(requests: Iterable[Request], opened: float, closed: float) -> Counter[Key]:
    """Every client's 2xx requests that ended in [opened, closed), as the request metrics count them (at their end;
    watches left out, which the metric counts when they end)."""
    return Counter(r.key for r in requests if r.verb != "WATCH" and r.ended is not None
                   and opened <= r.ended < closed and r.code is not None and 200 <= r.code < 300)
