"""A "production" cluster built on its own terms, the original that a replay's fidelity is measured against
(benchmarks/replay_fidelity.py and tests/integration/test_replay_end_to_end.py build it alike):

- a local control plane whose apiserver writes an audit log (who sent which request) from its first request, its
  fake nodes' agent (kwok) sending as the nodes, as a replaying cluster's does;
- fake nodes (kwok's), and namespaces of the cluster's own (plain ones: the harness's label would make a capture
  count them as the load tester's) holding ConfigMaps, Secrets and a custom resource (Widgets, its CRD installed
  first and watched by the controller-manager before the traffic, as a cluster's long-installed CRD is), their
  data of a few sizes in turn, most small;
- a steady traffic of several client identities, each a certificate signed by the cluster's own CA: a node
  (`system:node:<one of the fake nodes>`) listing its pods as a kubelet does, a service account listing its
  namespace's ConfigMaps, a user reading ConfigMaps and Widgets one by one. The service account and the user are
  in system:masters, so that no RBAC object of the test's own (whose kinds a replay cannot make) is needed.
"""

from __future__ import annotations

import base64
import itertools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests.binaries import cache as binaries
from loadtests.capture.traffic import LONGRUNNING, open_by_resource
from loadtests.controlplane.audit import AuditLog
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.controlplane.pki import Authority
from loadtests.controlplane.processes import wait_for
from loadtests.kube import objects
from loadtests.kube.access import ClusterAccess
from loadtests.kube.rest import RestClient
from loadtests.measure.prometheus import scrape_apiserver
from loadtests.polling import poll_until
from loadtests.run.fleet import FLEET_USER_AGENT, Fleet

GROUP = "production.example.com"
CRD_NAME = f"widgets.{GROUP}"
WATCHED_TIMEOUT_S = 90.0  # two of kube-controller-manager's discovery polls, and its start
USER_AGENT = "production-traffic"  # the product the traffic's requests name (none of the harness's own)
NODE, SERVICE_ACCOUNT, USER = "node", "serviceaccount", "user"


@dataclass(frozen=True)
class Shape:
    """What the cluster holds: nodes, namespaces and, in each, objects of each kind; their data's sizes in turn."""

    nodes: int = 3
    namespaces: tuple[str, ...] = ("team-a", "team-b")
    configmaps: int = 4  # per namespace
    secrets: int = 2
    widgets: int = 3
    # bytes of data per object, in turn: most objects small (a few hundred bytes served), as a cluster's ConfigMaps
    # and Secrets mostly are, so their size p50 is one a replay's own labels would miss if they were counted
    sizes: tuple[int, ...] = (16, 64, 2048, 16384)


@dataclass(frozen=True)
class Stream:
    """One class of the traffic: who sends it (NODE, SERVICE_ACCOUNT, USER), what, how many per second."""

    identity: str
    what: str  # "list pods", "list configmaps", "get configmaps", "get widgets"
    per_s: float


# a few per second each: an audit log's rates are over its span from the first node's Lease (its filling included),
# and a replay's window of 10 s must hold enough of each class that one request more or less is within 10 %
STREAMS = (Stream(NODE, "list pods", 6.0), Stream(SERVICE_ACCOUNT, "list configmaps", 6.0),
           Stream(USER, "get configmaps", 8.0), Stream(USER, "get widgets", 6.0))


@dataclass
class Sent:
    """What the traffic sent while it ran: requests per stream's `what`, failures, seconds."""

    requests: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    seconds: float = 0.0


@dataclass
class Production:
    """The running cluster: its plane, an admin client, its audit log, and what it was filled with."""

    plane: LocalControlPlane
    admin: RestClient
    audit_log: Path
    shape: Shape
    made: dict[str, int] = field(default_factory=dict)  # objects per kind
    data_bytes: int = 0

    @property
    def kubeconfig(self) -> str:
        return self.admin.access.kubeconfig


@contextmanager
def production_cluster(bins: binaries.Binaries, directory: Path, name: str,
                       shape: Shape = Shape()) -> Iterator[Production]:
    """The cluster up (its audit log in `directory`), its nodes Ready and its objects made; stopped afterwards,
    its processes by pid, whatever happens."""
    (directory / "audit").mkdir(parents=True, exist_ok=True)
    audit = AuditLog(directory / "audit")
    # its fake nodes' heartbeats sent as nodes (kwok in system:nodes), as a cluster's kubelets send theirs and as
    # a replaying cluster's fleet sends them (a plan's target identities: production); as an admin they were a
    # class of their own, the user's, that no replay sends
    plane = LocalControlPlane(LocalOptions(name=name, directory=directory / "cluster", audit=audit,
                                           etcd_storage="memory", identities="production"), bins)
    plane.up(log=lambda _line: None)
    try:
        admin = RestClient(plane.access(), user_agent=FLEET_USER_AGENT)
        try:
            Fleet(admin).scale_nodes(shape.nodes, timeout_s=120)
            found = Production(plane, admin, audit.path, shape)
            fill(found)
            yield found
        finally:
            admin.close()
    finally:
        plane.down()


def crd() -> dict[str, Any]:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD_NAME},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def body(kind: str, name: str, size: int) -> dict[str, Any]:
    """An object of `kind` whose data is `size` bytes of random text."""
    text = base64.b64encode(os.urandom(size))[:size].decode()
    if kind == "ConfigMap":
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "data": {"blob": text}}
    if kind == "Secret":
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "type": "Opaque",
                "data": {"blob": base64.b64encode(text.encode()).decode()}}
    return {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name}, "spec": {"blob": text}}


def fill(cluster: Production) -> None:
    """The Widgets' CRD, the namespaces and their objects, sizes in turn (counted in `cluster.made`); then until
    the control plane watches the Widgets."""
    client, shape = cluster.admin, cluster.shape
    client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd())
    wait_for(lambda: bool(client.request("GET", f"/apis/{GROUP}/v1/widgets", ok=(404,))), 60, "Widgets served")
    sizes = itertools.cycle(shape.sizes)
    collections = (("ConfigMap", shape.configmaps, "/api/v1/namespaces/{ns}/configmaps"),
                   ("Secret", shape.secrets, "/api/v1/namespaces/{ns}/secrets"),
                   ("Widget", shape.widgets, f"/apis/{GROUP}/v1/namespaces/{{ns}}/widgets"))
    for ns in shape.namespaces:
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for kind, count, path in collections:
            for i in range(count):
                size = next(sizes)
                client.create(path.format(ns=ns), body(kind, f"{kind.lower()}-{i}", size))
                cluster.made[kind] = cluster.made.get(kind, 0) + 1
                cluster.data_bytes += size
    # a production cluster has had its CRD for long: its controller-manager watches the Widgets (it finds a new
    # resource by polling discovery every 30 s), as a replay's is waited for until it does
    def watched() -> bool:
        page = scrape_apiserver(client.access, families={LONGRUNNING})
        return open_by_resource(page).get((GROUP, "widgets"), 0) > 0

    if not poll_until(watched, WATCHED_TIMEOUT_S, interval_s=1.0):
        raise TimeoutError(f"kube-controller-manager did not watch the Widgets within {WATCHED_TIMEOUT_S:.0f} s")


def identities(cluster: Production) -> dict[str, ClusterAccess]:
    """An access per identity, each a client certificate the cluster's CA signs: the first fake node's kubelet,
    a service account of the first namespace, a user."""
    pki = Path(cluster.plane.directory) / "pki"
    authority = Authority.load(pki)
    admin = cluster.admin.access
    who = {NODE: (f"system:node:{objects.node_name(0)}", ("system:nodes",)),
           SERVICE_ACCOUNT: (f"system:serviceaccount:{cluster.shape.namespaces[0]}:app",
                             ("system:serviceaccounts", "system:masters")),
           USER: ("alice", ("system:masters",))}
    found = {}
    for identity, (user, groups) in who.items():
        pair = authority.issue(f"production-{identity}", user, organization=groups)
        found[identity] = ClusterAccess(server=admin.server, kubeconfig="", ca_file=admin.ca_file,
                                        cert_file=str(pair.cert), key_file=str(pair.key))
    return found


def send(client: RestClient, stream: Stream, n: int, shape: Shape) -> None:
    """The n-th request of a stream, spread over the namespaces and objects in turn."""
    ns = shape.namespaces[n % len(shape.namespaces)]
    if stream.what == "list pods":
        client.request("GET", "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={objects.node_name(0)}"})
    elif stream.what == "list configmaps":
        client.request("GET", f"/api/v1/namespaces/{ns}/configmaps")
    elif stream.what == "get configmaps":
        client.request("GET", f"/api/v1/namespaces/{ns}/configmaps/configmap-{n % shape.configmaps}")
    else:
        client.request("GET", f"/apis/{GROUP}/v1/namespaces/{ns}/widgets/widget-{n % shape.widgets}")


def send_traffic(cluster: Production, seconds: float, streams: tuple[Stream, ...] = STREAMS) -> Sent:
    """Each stream under its identity, paced to its own steady rate (the j-th request of a stream at j / rate
    from the start), for `seconds`."""
    accesses = identities(cluster)
    clients = [RestClient(accesses[s.identity], user_agent=USER_AGENT) for s in streams]
    sent, counts = Sent(), [0] * len(streams)
    started = time.monotonic()
    try:
        while True:
            which = min(range(len(streams)), key=lambda i: counts[i] / streams[i].per_s)
            due = started + counts[which] / streams[which].per_s
            if due >= started + seconds:
                break
            time.sleep(max(0.0, due - time.monotonic()))  # pacing: the request's own time, not a readiness wait
            try:
                send(clients[which], streams[which], counts[which], cluster.shape)
            except Exception:  # noqa: BLE001 - counted and said; the traffic goes on
                sent.errors += 1
            counts[which] += 1
    finally:
        for client in clients:
            client.close()
    sent.seconds = time.monotonic() - started
    sent.requests = {f"{s.identity}: {s.what}": n for s, n in zip(streams, counts, strict=True)}
    return sent


def capture_args(cluster: Production, out: Path) -> list[str]:
    """`loadtest capture`'s arguments for this cluster, its traffic from its audit log, as a user runs it."""
    context = "loadtest"  # the context of the kubeconfig a local control plane writes
    return ["capture", "--kubeconfig", cluster.kubeconfig, "--context", context, "--allow-context", context,
            "--audit-log", str(cluster.audit_log), "--out", str(out)]
