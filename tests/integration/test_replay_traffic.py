"""A profile's replayed traffic against the suite's real control plane, at the smallest scale: a few classes at a
few requests per second for 10 s, each achieved within 10 % of its asked rate, the node class sent as the fake
nodes (the Node authorizer decided its requests) and the others as the load."""

from __future__ import annotations

from pathlib import Path

from loadtests.capture.replay_traffic import list_shape
from loadtests.config.scenarios import objects_namespace, requests_row_name
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.load.generator import StepLoad
from tests.checks import fleet_of, run_load
from tests.integration.test_node_agents import node_decisions

NODES = 2
WINDOW_S = 10
CONFIGMAP = {"template": "cm.yaml", "replicas": 1, "input_vars": {},
             "text": "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\ndata:\n  k: v\n"}


def row(verb: str, resource: str, kind: str, client: str, rate: float, scope: str = "namespace",
        field_key: str = "") -> dict:
    found = {"verb": verb, "group": "", "version": "v1", "resource": resource, "kind": kind, "namespaced": True,
             "scope": scope, "client_class": client, "rate": rate}
    found["name"] = requests_row_name(found)
    if verb == "list":
        found["list"] = {**list_shape(None), "with_limit": 0.5, "limit": 10, "label_selector": 0.5,
                         "field_selector": 1.0 if field_key else 0.0, "field_key": field_key}
    if verb in ("create", "delete"):
        found["template"] = CONFIGMAP
    return found


def test_each_class_keeps_its_rate_under_its_identity(local_plane: LocalControlPlane, control_plane: TargetInfo,
                                                     rest: RestClient, tmp_path: Path) -> None:
    fleet_of(rest, NODES)
    namespace = objects_namespace(0)
    rest.create("/api/v1/namespaces", objects.namespace_manifest(namespace), exist_ok=True)
    prefilled = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
                 "metadata": {"name": "replay-prefilled", "namespace": namespace, "labels": objects.MANAGED_BY}}
    rest.create(f"/api/v1/namespaces/{namespace}/configmaps", prefilled, exist_ok=True)
    rows = [row("list", "configmaps", "ConfigMap", "serviceaccount", 4.0),
            row("get", "configmaps", "ConfigMap", "user", 3.0),
            row("create", "configmaps", "ConfigMap", "serviceaccount", 2.0),
            row("delete", "configmaps", "ConfigMap", "serviceaccount", 1.0),
            row("list", "pods", "Pod", "node", 3.0, scope="cluster", field_key="spec.nodeName")]  # as kubelets list
    before = node_decisions(control_plane)
    load = {"requests": {"rows": rows, "watches": [], "namespaces": 1}}
    outcome = run_load(StepLoad(load, nodes=NODES, duration_s=WINDOW_S, out_dir=tmp_path, run_id="it-replay"),
                       control_plane.access,
                       node_identities=local_plane.node_identities([objects.node_name(i) for i in range(NODES)]))
    stats = {c.name: c for c in outcome.client}
    for asked in rows:
        got = stats[asked["name"]]
        achieved = (got.count - got.failures) / WINDOW_S
        assert abs(achieved - asked["rate"]) <= 0.1 * asked["rate"] + 1 / WINDOW_S, (asked["name"], achieved,
                                                                                    got, outcome.failures)
    # the node row went out as the nodes: the Node authorizer decides only for system:node:<name> users
    assert node_decisions(control_plane) - before >= 3.0 * WINDOW_S * 0.9
    [rate] = [r for r in outcome.rates if r.scenario == "requests"]
    assert rate.asked_per_s == 13.0 and abs(rate.achieved_per_s - 13.0) <= 1.3 + 0.1
