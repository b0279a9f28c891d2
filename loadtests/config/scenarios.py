"""Every scenario, declared once: its parameters and their defaults, the values a parameter may take, what it
demands of the load generator at a given scale (users per class, the rate or count it asks for), and the
request whose successes measure what it achieved. The plan validates against this, the load generator sizes
its users from it, and the report judges asked vs achieved from what it says.

Scenarios are named here by string only; nothing here imports their code or Locust: the runner reads this,
and importing Locust monkey-patches the whole process for gevent. Their code, one module per scenario with a
`build(config, params, counts) -> list[type[User]]`, is found by the same name in
loadtests/load/locust/scenarios/registry.py, imported only inside the Locust processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from loadtests.config.node_agents import KUBE_PROXY, KUBELET, AgentWatch, node_watches, object_watch
from loadtests.config.timeline import Timeline
from loadtests.kube.names import ListNames, WatchNames, request_name
from loadtests.kube.objects import NS_CHURN, NS_FLEET, NS_OBJECTS_PREFIX
from loadtests.kube.watch import ENCODINGS
from loadtests.results.loadgen import ClientStat, RateResult

# resources a LIST or WATCH scenario may name (each has a path in loadtests.kube.paths)
LIST_RESOURCES = frozenset({"pods", "nodes", "configmaps", "services", "endpointslices", "leases", "events",
                            "namespaces"})

CREATE_PODS = request_name("POST", "pods")
DELETE_PODS = request_name("DELETE", "pods")
SCALE_DEPLOYMENT = request_name("PATCH", "deployments/scale")
KUBELET_WATCH = WatchNames.of("pods", "", "node")
# what a kube-proxy watches of a Service, and the namespaces whose harness pods a Service may select
SERVICE_WATCH_RESOURCES = frozenset({"endpoints", "endpointslices"})
SERVICE_NAMESPACES = frozenset({NS_CHURN, NS_FLEET})
# scenarios whose users send as the fake nodes themselves (each kubelet as its node, their kube-proxy): the
# target issues every step's node identities for them (kube/node_identity.py)
NODE_IDENTITY_SCENARIOS = frozenset({"node_agents", "requests"})
# the type of a client row that counts what watchers received: one per watch event, content_bytes its bytes
RECEIVED = "RECV"
# the type of the client rows in which informers say how they got back in sync after losing their state (a
# cut watch, a 410): one count per recovery, its "response time" the seconds it took (reflector.SyncClock)
SYNCED = "SYNC"


def informer_names(params: dict[str, Any]) -> WatchNames:
    """An informer's request names; a watch-list informer's watches say so (its state comes by its watch)."""
    mode = "watch-list" if params.get("watch_list") else ""
    return WatchNames.of(params["resource"], params["namespace"], "informer", mode, list_rv="0")


class InformerSyncNames(NamedTuple):
    """The SYNCED rows of informers, the same names whichever way they sync (so that two setups compare). Each
    informer's first return to sync after losing its state fills `cut` (from the watch's cut to in sync again;
    its content bytes: what the informer received to get there) and `sync` (the attempt that got there, from its
    start to in sync), so their counts are informers; any later return (a watch of theirs cut again, e.g. by an
    apiserver closing a watcher that reads too slowly) is one count of `again`, with its time and bytes."""

    cut: str
    sync: str
    again: str

    def rows(self, recovery: int, out_of_sync_s: float, sync_s: float, nbytes: int) -> list[tuple[str, float, int]]:
        """(row name, ms, bytes) of an informer's `recovery`-th return to sync (1: its first)."""
        if recovery > 1:  # cut again after it was back in sync: not the first loss's recovery
            return [(self.again, out_of_sync_s * 1000.0, nbytes)]
        return [(self.cut, out_of_sync_s * 1000.0, nbytes), (self.sync, sync_s * 1000.0, 0)]  # bytes counted once


def informer_sync_names(params: dict[str, Any]) -> InformerSyncNames:
    base = f"{params['resource']} informers" + (" (ns)" if params["namespace"] else "")
    return InformerSyncNames(f"{base}: cut to synced", f"{base}: the sync that succeeded",
                             f"{base}: cut again and synced")


def informer_received(params: dict[str, Any]) -> str:
    """The RECEIVED row of informers: the watch events (BOOKMARKs and a watch-list's initial events included)."""
    return f"{informer_names(params).first} events"


def poller_names(params: dict[str, Any]) -> ListNames:
    return ListNames.of(params["resource"], params["namespace"], str(params["resource_version"]))


@dataclass(frozen=True)
class Demand:
    """What a scenario asks of the load generator for one step, and how to tell what it achieved."""

    users: dict[str, int]  # user class name -> exact number of users (Locust fixed_count)
    asked: float  # per second, or a number of watches when per_second is False
    unit: str
    counted_by: tuple[str, str]  # (Type, Name) of the client row whose successes are what was achieved
    per_second: bool = True
    received_by: tuple[str, str] | None = None  # (Type, Name) of the row counting what its watchers received
    also_counted_by: tuple[tuple[str, str], ...] = ()  # more rows that count, e.g. one per kind of object
    also_received_by: tuple[tuple[str, str], ...] = ()  # rows whose response bytes were received too (LISTs)

    def achieved(self, scenario: str, client: list[ClientStat], duration_s: float) -> RateResult:
        """Successes of the measuring request per second of the window (or watches established); for
        watchers that count what they receive, the events and bytes they received in the window too."""
        counted = {self.counted_by, *self.also_counted_by}
        done = sum(s.count - s.failures for s in client if (s.type, s.name) in counted)
        achieved = done / duration_s if self.per_second and duration_s > 0 else float(done)
        result = RateResult(scenario=scenario, asked_per_s=self.asked, achieved_per_s=round(achieved, 3),
                            unit=self.unit, per_second=self.per_second)
        if self.received_by is not None:
            rows = [s for s in client if (s.type, s.name) == self.received_by]
            result.events = sum(s.count for s in rows)
            also = [s for s in client if (s.type, s.name) in self.also_received_by]
            result.received_bytes = sum(s.content_bytes or 0 for s in (*rows, *also))
        return result


def _users_for(rate: float, users: int) -> int:
    return max(1, int(users)) if rate > 0 else 0


def _pod_churn(params: dict[str, Any], nodes: int) -> Demand:
    users = {"PodChurn": _users_for(params["rate"], params["users"])}
    if params["deployment_scale_every_s"] > 0:
        users["DeploymentScaler"] = 1
    return Demand(users=users, asked=float(params["rate"]), unit="creates", counted_by=("POST", CREATE_PODS))


def kubelet_watcher_count(params: dict[str, Any], nodes: int) -> int:
    """One watcher per node (times per_node), capped at max_watchers."""
    return max(0, min(int(params["max_watchers"]), round(params["per_node"] * nodes)))


def node_agent_received(watch: AgentWatch) -> str:
    """The RECEIVED row of one kind of node-agent watch: its events and their bytes."""
    return f"{watch.names.first} events"


def node_agent_token_name() -> str:
    return request_name("POST", "serviceaccounts/token", KUBELET)


def node_agent_event_names() -> dict[str, str]:
    """The kubelet's event rows, by the reason of the event (a container's start, its stop)."""
    return {reason: request_name("POST", "events", KUBELET, reason) for reason in ("Pulled", "Created", "Started",
                                                                                    "Killing")}


def node_agent_count(params: dict[str, Any], nodes: int) -> int:
    """The nodes given agents: every node (times per_node), at most max_nodes."""
    return max(0, min(int(params["max_nodes"]), round(params["per_node"] * nodes)))


def _node_agents(params: dict[str, Any], nodes: int) -> Demand:
    count = node_agent_count(params, nodes)
    agents = (KUBELET, KUBE_PROXY) if params["kube_proxy"] else (KUBELET,)
    watches = [watch for agent in agents for watch in node_watches(agent)]
    users = {"NodeKubelet": count, **({"NodeProxy": count} if params["kube_proxy"] else {})}
    rows = [("WATCH", watch.names.first) for watch in watches]
    received = [(RECEIVED, node_agent_received(watch)) for watch in (*watches, object_watch("configmaps"),
                                                                       object_watch("secrets"))]
    return Demand(users=users, asked=float(count * len(watches)), unit="watches", counted_by=rows[0],
                  also_counted_by=tuple(rows[1:]), per_second=False, received_by=received[0],
                  also_received_by=tuple(received[1:]))


def _kubelet_watchers(params: dict[str, Any], nodes: int) -> Demand:
    count = kubelet_watcher_count(params, nodes)
    return Demand(users={"KubeletWatcher": count}, asked=float(count), unit="watches",
                  counted_by=("WATCH", KUBELET_WATCH.first), per_second=False)


@dataclass(frozen=True)
class ServiceWatch:
    """What a kube-proxy-like watcher follows: the objects the controller-manager keeps for one Service (its
    Endpoints, one object named like it; or its EndpointSlices, labelled with its name), and the client rows
    that count its watches and what they received."""

    resource: str
    namespace: str
    field_selector: str
    label_selector: str
    names: WatchNames
    received: str  # name of the RECEIVED row

    @classmethod
    def of(cls, params: dict[str, Any]) -> ServiceWatch:
        resource, namespace, service = params["resource"], params["namespace"], params["service"]
        by_name = resource == "endpoints"
        names = WatchNames.of(resource, namespace, "service", list_rv="0")
        return cls(resource, namespace, field_selector=f"metadata.name={service}" if by_name else "",
                   label_selector="" if by_name else f"kubernetes.io/service-name={service}", names=names,
                   received=f"{names.first} events")


def _service_watchers(params: dict[str, Any], nodes: int) -> Demand:
    count = kubelet_watcher_count(params, nodes)  # one per node, like kubelets: kube-proxy runs beside each
    watch = ServiceWatch.of(params)
    return Demand(users={"ServiceWatcher": count}, asked=float(count), unit="watches",
                  counted_by=("WATCH", watch.names.first), per_second=False,
                  received_by=(RECEIVED, watch.received))


def _informers(params: dict[str, Any], nodes: int) -> Demand:
    count = int(params["count"])
    names = informer_names(params)
    lists = [n for found in (names.initial_list, names.relist) if found for n in (found.first, found.more)]
    return Demand(users={"Informer": count}, asked=float(count), unit="watches",
                  counted_by=("WATCH", names.first), per_second=False,
                  received_by=(RECEIVED, informer_received(params)),
                  also_received_by=tuple(("LIST", name) for name in lists))


def _list_pollers(params: dict[str, Any], nodes: int) -> Demand:
    users = {"ListPoller": _users_for(params["rate"], params["users"])}
    return Demand(users=users, asked=float(params["rate"]), unit="lists",
                  counted_by=("LIST", poller_names(params).first))


def objects_request(verb: str, kind: str, subresource: str = "") -> str:
    """The client row of the objects scenario's requests: one per verb and kind ("POST ConfigMap (objects)")."""
    return request_name(verb, f"{kind}/{subresource}" if subresource else kind, "objects")


def objects_namespaces(nodes: int, nodes_per_namespace: int, namespaces: int = 0) -> list[str]:
    """The objects scenario's namespaces at a scale: one per `nodes_per_namespace` nodes, as ClusterLoader2's
    NODES_PER_NAMESPACE, or `namespaces` whatever the scale where given (a replay: the captured namespaces × k);
    at least one."""
    count = max(1, int(namespaces) or -(-int(nodes) // max(1, int(nodes_per_namespace))))
    return [objects_namespace(i) for i in range(count)]


def objects_namespace(index: int) -> str:
    """The objects scenario's index-th namespace."""
    return f"{NS_OBJECTS_PREFIX}{index}"


def _objects(params: dict[str, Any], nodes: int) -> Demand:
    kinds = sorted({str(t.get("kind", "")) for t in params.get("templates") or []})
    rows = tuple(("POST", objects_request("POST", kind)) for kind in kinds) or (("POST", objects_request("POST", "")),)
    return Demand(users={"ObjectsUser": _users_for(params["rate"], params["users"]) if kinds else 0},
                  asked=float(params["rate"]) if kinds else 0.0, unit="creates", counted_by=rows[0],
                  also_counted_by=rows[1:])


# the requests scenario (a profile's replayed traffic): the rate one of its users is asked to keep at most (one
# request at a time, each a few ms on an unloaded apiserver), so a class's rate is spread over enough users
REQUESTS_USER_RATE = 20.0
REQUEST_TYPES = {"get": "GET", "list": "LIST", "create": "POST", "update": "PUT", "patch": "PATCH",
                 "delete": "DELETE", "watch": "WATCH"}
NODE_CLASS = "node"  # rows of this client class send as the fake nodes (kube/node_identity.py)
SERVICE_ACCOUNT_CLASS = "serviceaccount"  # rows of this class send as a ServiceAccount (node_identity.py)
USER_CLASS = "user"  # rows of this class send as a user of their own (node_identity.REPLAY_USER)
# the requests scenario's users by the client class whose rows they send (any other class: the load's identity)
REQUESTS_USERS = {NODE_CLASS: "ReplayNodeRequests", SERVICE_ACCOUNT_CLASS: "ReplayServiceAccountRequests",
                  USER_CLASS: "ReplayUserRequests"}
LOAD_REQUESTS_USER = "ReplayRequests"


def requests_user(row: dict[str, Any]) -> str:
    """The requests scenario's user class that sends a row: one under an identity of the row's client class."""
    return REQUESTS_USERS.get(row["client_class"], LOAD_REQUESTS_USER)


def requests_row_name(row: dict[str, Any]) -> str:
    """A replayed class's client row: its verb and resource, "replay", its client class and scope."""
    scope = "ns" if row.get("scope") == "namespace" else ""
    resource = f"{row['resource']}.{row['group']}" if row.get("group") else row["resource"]
    return request_name(REQUEST_TYPES[row["verb"]], resource, "replay", row["client_class"], scope)


def peak_rate(row: dict[str, Any]) -> float:
    """A row's highest rate: its mean, or its timeline's peak minute (config/timeline.py)."""
    timeline = row.get("timeline")
    return float(row["rate"]) * (Timeline.from_dict(timeline, row.get("name", "row")).peak if timeline else 1.0)


def requests_users(params: dict[str, Any]) -> dict[str, int]:
    """Users per class: each identity's rows spread over users of at most REQUESTS_USER_RATE requests/s at their
    peak; one user per held watch."""
    def users(rate: float) -> int:
        return -(-int(rate * 1000) // int(REQUESTS_USER_RATE * 1000)) if rate > 0 else 0

    rows = params.get("rows") or []
    found = {name: users(sum(peak_rate(r) for r in rows if requests_user(r) == name))
             for name in (LOAD_REQUESTS_USER, *REQUESTS_USERS.values())}
    return {**found, "ReplayWatcher": sum(int(w["count"]) for w in params.get("watches") or [])}


def _requests(params: dict[str, Any], nodes: int) -> Demand:
    rows = params.get("rows") or []
    counted = tuple((REQUEST_TYPES[r["verb"]], r["name"]) for r in rows) or (("GET", "(no row)"),)
    return Demand(users=requests_users(params), asked=round(sum(float(r["rate"]) for r in rows), 6),
                  unit="requests", counted_by=counted[0], also_counted_by=counted[1:])


@dataclass(frozen=True)
class Scenario:
    """One scenario's declaration."""

    name: str
    summary: str
    defaults: dict[str, Any]
    demand: Callable[[dict[str, Any], int], Demand]
    choices: dict[str, frozenset[str]] = field(default_factory=dict)  # parameter -> the values it may take
    # parameters that are lists of object templates (read and checked with the plan: config/templates.py)
    template_lists: frozenset[str] = frozenset()


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario(
        "pod_churn", "bare pods created at `rate`/s and deleted after `lifetime_s`; optionally a Deployment "
        "scaled every `deployment_scale_every_s` s between `deployment_min` and `deployment_max` (0 = off); "
        "`payload_bytes` of annotation per pod (fills etcd faster); `anti_affinity`: the load's pods require "
        "a node of their own (required pod anti-affinity on kubernetes.io/hostname); `namespace`: loadtest-churn, or "
        "loadtest-fleet to churn pods beside the steady ones (behind one Service with them)",
        {"rate": 5.0, "lifetime_s": 10.0, "users": 2, "deployment_scale_every_s": 0.0, "deployment_min": 0,
         "deployment_max": 10, "payload_bytes": 0, "anti_affinity": False, "namespace": NS_CHURN},
        _pod_churn, {"namespace": SERVICE_NAMESPACES}),
    Scenario(
        "kubelet_watchers", "one WATCH on pods with fieldSelector=spec.nodeName=<node> per fake node (times "
        "`per_node`), like kubelets; at most `max_watchers`; `encoding`: json, or protobuf as a real kubelet asks "
        "(Accept application/vnd.kubernetes.protobuf, events in length-prefixed frames)",
        {"per_node": 1.0, "max_watchers": 2000, "encoding": "json"}, _kubelet_watchers,
        {"encoding": frozenset(ENCODINGS)}),
    Scenario(
        "node_agents", "every fake node's kubelet and kube-proxy as the apiserver sees a real node's "
        "(docs/node-agents.md): each agent's watches with their selectors (the kubelet's pods, Node, Services, "
        "RuntimeClasses, CSIDrivers, PodCertificateRequests, and one per ConfigMap and Secret its pods reference; "
        "kube-proxy's Services, EndpointSlices, ServiceCIDRs and Node), streaming lists, bookmarks and renewals "
        "as client-go's reflectors; a token request and container events per pod start; on a local control "
        "plane each kubelet as its node (system:node:<node>) and kube-proxy as kubeadm's ServiceAccount. "
        "`per_node`: nodes given agents per node (at most `max_nodes`); `encoding`: protobuf as the real agents, "
        "or json; `kube_proxy`: false leaves kube-proxy out",
        {"per_node": 1.0, "max_nodes": 2000, "encoding": "protobuf", "kube_proxy": True}, _node_agents,
        {"encoding": frozenset(ENCODINGS)}),
    Scenario(
        "service_watchers", "a ClusterIP Service `service` selecting the harness's pods of `namespace`, and one "
        "LIST+WATCH of its `resource` (endpoints: the object named like it; endpointslices: its slices) per "
        "fake node (times `per_node`), like kube-proxy; at most `max_watchers`; counts the events and bytes "
        "the watchers received",
        {"per_node": 1.0, "max_watchers": 2000, "resource": "endpointslices", "service": "loadtest-backends",
         "namespace": NS_CHURN},
        _service_watchers, {"resource": SERVICE_WATCH_RESOURCES, "namespace": SERVICE_NAMESPACES}),
    Scenario(
        "informers", "`count` informers: LIST then WATCH from its resourceVersion with bookmarks, re-LIST on "
        "410 Gone; `reconnect_spread_s`: a watch cut early (its apiserver restarted) resumes after a random wait "
        "below it (0: at once); `watch_list`: the state comes by API streaming (one WATCH with "
        "sendInitialEvents=true, in sync at the BOOKMARK that ends its initial events) instead of a LIST; "
        "`relist_on_cut`: a watch cut early starts over from nothing (a LIST or a watch-list stream) instead "
        "of resuming; counts the bytes and events the informers received, and how long each was out of sync "
        "after a cut",
        {"count": 4, "resource": "pods", "namespace": "", "reconnect_spread_s": 0.0, "watch_list": False,
         "relist_on_cut": False},
        _informers, {"resource": LIST_RESOURCES}),
    Scenario(
        "list_pollers", "periodic LISTs at `rate`/s; resource_version \"0\" is served from the watch cache, "
        "\"\" is a consistent read; `encoding`: json, or protobuf as client-go's generated clients ask",
        {"rate": 1.0, "users": 2, "resource": "pods", "resource_version": "0", "namespace": "", "limit": 500,
         "encoding": "json"},
        _list_pollers, {"resource": LIST_RESOURCES, "encoding": frozenset(ENCODINGS)}),
    Scenario(
        "requests", "a captured profile's traffic, replayed (capture/replay_traffic.py writes it): `rows`, each a "
        "class of requests (verb, group, version, resource, kind, scope, client_class) sent at its `rate`/s on "
        "the replay's objects (LISTs in their captured `list` shape, creates from the kind's `template`, "
        "updates, patches and deletes only on objects the load made or prefilled), node rows as the fake nodes; "
        "`watches`: `count` held LIST+WATCHes of a `resource` per client class; `namespaces`: the objects "
        "scenario's namespaces it acts in",
        {"rows": [], "watches": [], "namespaces": 1}, _requests),
    Scenario(
        "objects",
        "objects of any kind made from YAML templates (`templates`: each a `template` file with `replicas` objects per "
        "iteration and `input_vars`), created at `rate`/s in one namespace per `nodes_per_namespace` nodes (or "
        "`namespaces` of them whatever the step's nodes, where above 0), updated every `update_every_s` s (a rolling "
        "update for Deployments, StatefulSets and DaemonSets), scaled every `scale_every_s` s to a random size in "
        "[0.5x, 1.5x] of the template's (kinds with a /scale subresource) and deleted after `lifetime_s`; `install`: "
        "templates (CustomResourceDefinitions, PriorityClasses) made once before the steps and removed at the end; "
        "`prefill`: templates whose `replicas` objects are made once before the first window, in the first namespace "
        "(or over the namespaces as the entry's `per_namespace` counts say; cluster-scoped kinds without one), and kept"
        " until the end (a set of objects for the load to read)",
        {"rate": 5.0, "users": 2, "lifetime_s": 60.0, "update_every_s": 0.0, "scale_every_s": 0.0,
         "nodes_per_namespace": 100, "namespaces": 0, "templates": [], "install": [], "prefill": []},
        _objects, template_lists=frozenset({"templates", "install", "prefill"})),
)}


def scenario_params(load: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The scenarios of a plan's load section, defaults filled in; accepts {"scenarios": {...}} or the
    mapping itself. Unknown names are refused (the plan validation already does; this is for direct use)."""
    scenarios = load["scenarios"] if isinstance(load.get("scenarios"), dict) else load
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        raise ValueError(f"unknown load scenario {unknown[0]!r}; expected one of: {', '.join(sorted(SCENARIOS))}")
    return {name: {**SCENARIOS[name].defaults, **(params or {})} for name, params in scenarios.items()}


def configured(load: dict[str, Any]) -> dict[str, Any]:
    """A plan's scenarios by name, from its load as scenario_params takes it (the scenarios, or under `scenarios`)."""
    return load["scenarios"] if isinstance(load.get("scenarios"), dict) else load


def needs_node_identities(load: dict[str, Any]) -> bool:
    """Whether a plan's load (as scenario_params takes it) has a scenario that sends as the fake nodes."""
    return not NODE_IDENTITY_SCENARIOS.isdisjoint(configured(load))


def demands(load: dict[str, Any], nodes: int) -> dict[str, Demand]:
    """Every configured scenario's demand for a step with `nodes` nodes."""
    return {name: SCENARIOS[name].demand(params, nodes) for name, params in scenario_params(load).items()}


def achieved_rates(load: dict[str, Any], nodes: int, duration_s: float, client: list[ClientStat]) -> list[RateResult]:
    """Asked vs achieved per scenario over the measured window."""
    return [demand.achieved(name, client, duration_s) for name, demand in demands(load, nodes).items()]


@dataclass
class UserPlan:
    """The exact user allocation of one step (Locust --users must be their sum)."""

    by_class: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_class.values())


def user_plan(load: dict[str, Any], nodes: int) -> UserPlan:
    plan = UserPlan()
    for demand in demands(load, nodes).values():
        for cls, count in demand.users.items():
            plan.by_class[cls] = plan.by_class.get(cls, 0) + count
    return plan
