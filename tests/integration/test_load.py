"""The load generator against a real control plane: every scenario for a few seconds, what it achieved,
what it left behind, how refused requests show up, and kubelet-like watches in protobuf."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.processes import wait_for
from loadtests.kube import objects
from loadtests.kube.access import ClusterAccess
from loadtests.kube.names import WatchNames
from loadtests.kube.paths import resource_path
from loadtests.kube.reflector import Reflector
from loadtests.kube.rest import RestClient, send_once
from loadtests.kube.watch import WatchEvent, accept, ends_initial_events, watch_query
from loadtests.kube.watch_protobuf import ProtobufWatchDecoder
from loadtests.load.contract import LoadConfig
from loadtests.load.generator import LoadGenerator, StepLoad
from loadtests.run.fleet import Fleet
from tests.checks import fleet_of, leaves, run_load

NODES = 10
LOAD = {
    "pod_churn": {"rate": 5.0, "users": 2, "lifetime_s": 4.0, "deployment_scale_every_s": 5.0,
                  "deployment_max": 6},
    "kubelet_watchers": {"per_node": 1.0},
    "informers": {"count": 2},
    "list_pollers": {"rate": 2.0, "users": 2, "resource_version": "0", "limit": 100},
}


@pytest.fixture()
def fleet(rest: RestClient) -> Fleet:
    return fleet_of(rest, NODES)


def churn_pods_left(rest: RestClient, run_id: str) -> int:
    label = LoadConfig(access=rest.access, scenarios={}, nodes=0, run_id=run_id).run_label()
    pods = rest.get(f"/api/v1/namespaces/{objects.NS_CHURN}/pods", labelSelector=f"k8s-loadtest/run={label}")
    return len(pods.get("items", []))


def test_every_scenario_achieves_what_it_asks(control_plane: TargetInfo, rest: RestClient, fleet: Fleet,
                                              tmp_path: Path) -> None:
    outcome = run_load(StepLoad(LOAD, nodes=NODES, duration_s=15, out_dir=tmp_path, run_id="it-load"),
                       control_plane.access)

    stats = {c.name: c for c in outcome.client}
    rates = {r.scenario: r for r in outcome.rates}
    assert sum(c.failures for c in outcome.client) == 0, outcome.failures
    assert rates["pod_churn"].achieved_per_s >= 0.7 * 5.0, outcome.notes
    assert rates["list_pollers"].achieved_per_s >= 0.7 * 2.0, outcome.notes
    assert rates["kubelet_watchers"].achieved_per_s == NODES  # one established watch per node
    assert rates["informers"].achieved_per_s == 2
    assert stats["LIST pods (informer, rv=0)"].count == 2
    assert stats["PATCH deployments/scale"].count >= 2
    # lifetime over, or deleted on stop (a create cut short by the end of the run too: one per user at most)
    assert 0 <= stats["DELETE pods"].count - stats["POST pods"].count <= 2
    # apiserver-side latency of creates is sub-second here; Locust's client view agrees within reason
    assert stats["POST pods"].p50_ms is not None and stats["POST pods"].p50_ms < 1000

    # deletions go through kwok's pod-delete stage
    wait_for(lambda: churn_pods_left(rest, "it-load") == 0, 30, "churn pods deleted", interval_s=0.5)
    deployment = rest.get(f"/apis/apps/v1/namespaces/{objects.NS_CHURN}/deployments/churn-deploy")
    assert deployment["spec"]["replicas"] == 0  # scaled back to deployment_min when the user stopped


def test_refused_requests_are_failures_not_crashes(control_plane: TargetInfo, fleet: Fleet,
                                                   tmp_path: Path) -> None:
    anonymous = dataclasses.replace(control_plane.access, cert_file=None, key_file=None, token=None)
    gen = LoadGenerator(StepLoad({"pod_churn": {"rate": 4.0, "users": 1}, "informers": {"count": 1}},
                                 nodes=NODES, duration_s=4, out_dir=tmp_path), anonymous)
    try:
        gen.start()
        outcome = gen.wait(timeout=90)
    finally:
        gen.stop()
    stats = {c.name: c for c in outcome.client}
    assert stats["POST pods"].failures == stats["POST pods"].count > 0
    assert {f.error for f in outcome.failures} <= {"CatchResponseError('HTTP 401 Unauthorized')",
                                                   "CatchResponseError('HTTP 403 Forbidden')"}
    assert any("requests failed" in n for n in outcome.notes)
    assert {r.scenario: r.achieved_per_s for r in outcome.rates} == {"pod_churn": 0.0, "informers": 0.0}


def _protobuf_wire(access: ClusterAccess, node: str) -> tuple[str, bytes]:
    """(Content-Type, body) of a short watch of one node's pods asked for in protobuf, read raw off the wire."""
    query = watch_query(timeout_s=2, field_selector=f"spec.nodeName={node}", initial_events=True)
    url = access.server + resource_path("pods", objects.NS_CHURN, query=query)
    response = send_once("GET", url, tls=access.ssl_context(), timeout_s=15,
                         headers={"Accept": accept("protobuf"), **access.auth_headers()})
    assert response.status == 200, response.data[:300]
    return str(response.headers.get("Content-Type")), bytes(response.data)




def test_a_protobuf_watch_of_pods_sees_every_change_as_a_kubelet_would(control_plane: TargetInfo, rest: RestClient,
                                                                       fleet: Fleet, tmp_path: Path) -> None:
    """The wire is length-prefixed frames of `k8s\\x00` objects; the LIST+WATCH loop over the harness's client gets
    ADDED, MODIFIED, DELETED and the BOOKMARK that ends the initial events; a protobuf LIST decodes to every value
    of the JSON one; the load's kubelets (gevent, in Locust) hold their protobuf watches through pod churn without
    a failure or a re-watch (a frame they could not decode would end the watch)."""
    node = objects.node_name(0)
    content_type, body = _protobuf_wire(control_plane.access, node)
    assert content_type == "application/vnd.kubernetes.protobuf;stream=watch"
    first = int.from_bytes(body[:4], "big")
    assert 0 < first < len(body) and b"k8s\x00" in body[4:4 + first]
    assert ends_initial_events(ProtobufWatchDecoder().feed(body, 0.0)[-1])  # no pod yet: the bookmark alone

    events: list[WatchEvent] = []
    reflector = Reflector(rest, "pods", WatchNames.of("pods", objects.NS_CHURN, "it-proto", list_rv="0"),
                          namespace=objects.NS_CHURN, field_selector=f"spec.nodeName={node}", watch_list=True,
                          encoding="protobuf", on_event=events.append)
    watching = threading.Thread(target=reflector.run, daemon=True)
    watching.start()
    try:
        wait_for(lambda: any(ends_initial_events(e) for e in events), 30, "the initial events' bookmark")
        pod = {**objects.pod_manifest("it-proto", objects.NS_CHURN), "spec": {
            **objects.pod_manifest("it-proto", objects.NS_CHURN)["spec"], "nodeName": node}}
        rest.create(resource_path("pods", objects.NS_CHURN), pod)
        wait_for(lambda: any((e.object.get("status") or {}).get("phase") == "Running" for e in events), 30,
                 "the pod Running on the watch")
        as_json = rest.list_all("pods", objects.NS_CHURN, field_selector=f"spec.nodeName={node}").items or []
        as_protobuf = rest.list_all("pods", objects.NS_CHURN, field_selector=f"spec.nodeName={node}",
                                    encoding="protobuf").items or []
        assert len(as_json) == len(as_protobuf) == 1
        protobuf, json_form = leaves(as_protobuf[0]), leaves(as_json[0])
        # every value of the JSON form, the same and of the same type; what protobuf adds: only the empty
        # strings, zeros and falses of fields Go leaves out of JSON (omitempty)
        typed = {k: (type(v), v) for k, v in protobuf.items()}
        assert {k: typed.get(k) for k in json_form} == {k: (type(v), v) for k, v in json_form.items()}
        added = {k: v for k, v in protobuf.items() if k not in json_form}
        assert added and not any(added.values()), added
        rest.delete(resource_path("pods", objects.NS_CHURN, "it-proto"))
        wait_for(lambda: any(e.type == "DELETED" for e in events), 30, "the pod's deletion on the watch")
    finally:
        reflector.stop()
        watching.join(timeout=10)
    kinds = [e.type for e in events if e.type != "BOOKMARK"]
    assert kinds[0] == "ADDED" and "MODIFIED" in kinds and kinds[-1] == "DELETED", kinds
    pods = [e.object for e in events if e.type != "BOOKMARK"]
    assert {(p["kind"], p["metadata"]["name"], p["metadata"]["namespace"], p["spec"]["nodeName"]) for p in pods} == {
        ("Pod", "it-proto", objects.NS_CHURN, node)}
    assert reflector.errors == 0 and reflector.watches == 1, reflector.last_error

    load = {"kubelet_watchers": {"per_node": 1.0, "encoding": "protobuf"},
            "pod_churn": {"rate": 4.0, "users": 1, "lifetime_s": 2.0}}
    outcome = run_load(StepLoad(load, nodes=NODES, duration_s=10, out_dir=tmp_path, run_id="it-proto"),
                       control_plane.access)
    assert sum(c.failures for c in outcome.client) == 0, outcome.failures
    assert {r.scenario: r.achieved_per_s for r in outcome.rates}["kubelet_watchers"] == NODES
    assert not [c.name for c in outcome.client if c.name.startswith("WATCH pods (node") and c.name.endswith(
        ("rewatch)", "stream"))], [c.name for c in outcome.client]
