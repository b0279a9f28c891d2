"""Node agents against the suite's real control plane: every fake node's kubelet and kube-proxy hold the reference's
watches as their own identities (the audit log says who sent what), a pod's start brings its token request, its
events and a watch of the ConfigMap it references, and a node's protobuf watch survives a cut and a renewal from
the bookmarks it received, without a LIST."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from loadtests.config.node_agents import KUBELET, node_watches
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane
from loadtests.controlplane.processes import wait_for
from loadtests.kube import objects
from loadtests.kube.paths import resource_path
from loadtests.kube.reflector import Reflector
from loadtests.kube.rest import RestClient
from loadtests.kube.watch import WatchEvent, ends_initial_events
from loadtests.load.generator import StepLoad
from loadtests.measure.prometheus import scrape
from loadtests.run.fleet import Fleet
from tests.checks import fleet_of, run_load

NODES = 4
DECISIONS = "apiserver_authorization_decisions_total"


@pytest.fixture()
def fleet(rest: RestClient) -> Fleet:
    return fleet_of(rest, NODES)


def node_decisions(control_plane: TargetInfo) -> float:
    """Requests the Node authorizer allowed so far (apiserver_authorization_decisions_total)."""
    page = scrape(control_plane.access.server + "/metrics", control_plane.access, families=[DECISIONS])
    return page.total(DECISIONS, type="Node", decision="allowed") or 0.0


def test_each_nodes_agents_hold_every_watch_as_that_node(local_plane: LocalControlPlane, control_plane: TargetInfo,
                                                        rest: RestClient, fleet: Fleet, tmp_path: Path) -> None:
    names = [objects.node_name(i) for i in range(NODES)]
    before = node_decisions(control_plane)
    load = {"node_agents": {}, "pod_churn": {"rate": 2.0, "users": 1, "lifetime_s": 3.0}}
    outcome = run_load(StepLoad(load, nodes=NODES, duration_s=12, out_dir=tmp_path, run_id="it-agents"),
                       control_plane.access, node_identities=local_plane.node_identities(names))
    stats = {c.name: c for c in outcome.client}
    rate = {r.scenario: r for r in outcome.rates}["node_agents"]
    assert rate.achieved_per_s == rate.asked_per_s == NODES * 10, outcome.notes  # 6 kubelet + 4 kube-proxy watches
    # what a pod's start brings: a token bound to it, its container's events, a watch of kube-root-ca.crt (its
    # projected token volume's ConfigMap) in its namespace
    token = stats["POST serviceaccounts/token (kubelet)"]
    assert token.count >= 1 and token.failures == 0, outcome.failures
    assert stats["POST events (kubelet, Started)"].count >= 1
    per_object = stats["WATCH configmaps (kubelet, ns)"]
    assert per_object.count - per_object.failures >= 1
    # the only failures allowed: a per-object streaming list the Node authorizer refused because it had not yet
    # seen the pod that references the object (then client-go's LIST fallback), as real hollow nodes showed
    refused = {f.name for f in outcome.failures}
    assert refused <= {"WATCH configmaps (kubelet, ns)", "LIST configmaps (kubelet, ns, rv=0)"}, outcome.failures
    assert rate.events and rate.received_bytes

    # who they were: the Node authorizer decided requests (it decides only for users system:node:<name> in
    # system:nodes, and no other client of this control plane is one), and NodeRestriction held the token
    # requests to pods on the asking node (a kubelet sent as the load's admin would pass them all)
    decided = node_decisions(control_plane) - before
    assert decided >= rate.asked_per_s * 0.6, decided  # the kubelets' six watches per node, at the least


def test_a_nodes_protobuf_watch_resumes_from_its_bookmarks_after_a_cut_and_a_renewal(
        local_plane: LocalControlPlane, control_plane: TargetInfo, rest: RestClient, fleet: Fleet) -> None:
    """The node's own pods watch, as the kubelet holds it: a streaming list in protobuf as the node's identity,
    asking 6 s. Pods elsewhere move the resourceVersion on; the apiserver's bookmarks (one 2 s before each
    watch's end) carry it to the watcher. A cut (the connection shut) and the server's end of the watch are each
    followed by a watch from the last bookmark's resourceVersion: no LIST, no second streaming list, no 410, and a
    pod bound to the node afterwards is seen."""
    node, elsewhere = objects.node_name(2), objects.node_name(3)
    client = RestClient(local_plane.node_identities([node]).node_access(node))
    asked: list[dict[str, Any]] = []  # what each watch asked for, as sent
    send_watch = client.watch

    def watch(*args: Any, **options: Any) -> Any:
        asked.append({"bookmarks": True, **options})
        return send_watch(*args, **options)

    client.watch = watch  # type: ignore[method-assign]
    pods = next(w for w in node_watches(KUBELET) if w.resource == "pods")
    events: list[WatchEvent] = []
    reflector = Reflector(client, "pods", pods.names, field_selector=pods.field_selector_for(node), watch_list=True,
                          list_fallback=True, encoding="protobuf", watch_timeout_s=(6.0, 6.0),
                          on_event=events.append)
    watching = threading.Thread(target=reflector.run, daemon=True)
    watching.start()

    def bookmark_after(version: int) -> bool:
        return any(e.type == "BOOKMARK" and int(e.resource_version or 0) > version for e in events)

    def pod(name: str, on: str) -> None:
        manifest = objects.pod_manifest(name, objects.NS_CHURN)
        rest.create(resource_path("pods", objects.NS_CHURN), {**manifest, "spec": {**manifest["spec"], "nodeName": on}})

    try:
        wait_for(lambda: any(ends_initial_events(e) for e in events), 30, "the initial events' bookmark")
        start = int(reflector.resource_version or 0)
        pod("it-agents-elsewhere", elsewhere)
        wait_for(lambda: bookmark_after(start), 30, "a bookmark past the other node's pod")
        reflector.cut()
        wait_for(lambda: reflector.watches >= 3, 30, "the watch resumed after the cut and renewed at its end")
        pod("it-agents-here", node)
        wait_for(lambda: any(e.object.get("metadata", {}).get("name") == "it-agents-here" for e in events), 30,
                 "the node's new pod on the resumed watch")
    finally:
        reflector.stop()
        watching.join(timeout=10)
        for name in ("it-agents-elsewhere", "it-agents-here"):
            rest.delete(resource_path("pods", objects.NS_CHURN, name))
        client.close()
    sent = client.sent()
    # the cut is the one broken watch; nothing listed, nothing expired
    assert sent.get(("LIST", "pods"), 0) == 0 and reflector.gone == 0 and reflector.errors <= 1, sent
    assert all(e.object.get("spec", {}).get("nodeName", node) == node for e in events if e.type != "BOOKMARK")
    assert int(reflector.resource_version or 0) > start
    assert len(asked) >= 3 and [a["initial_events"] for a in asked].count(True) == 1, asked
    assert all(a["encoding"] == "protobuf" and a["bookmarks"] for a in asked), asked
    assert all(a["resource_version"] for a in asked[1:]), asked  # each from where the last one ended
