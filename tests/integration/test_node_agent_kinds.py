"""Every kind a node's kubelet and kube-proxy watch or write, as a real kube-apiserver answers a LIST of it in
protobuf: served where paths.RESOURCES says (PodCertificateRequest at certificates.k8s.io/v1, by default), and
decoded by the generated messages into every value of the JSON answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from loadtests.kube.paths import RESOURCES, object_path, resource_path
from loadtests.kube.rest import RestClient
from tests.checks import leaves

NS = "default"
# one object of each kind the apiserver does not make itself, as a node's agents or their controllers write them
MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "it-runc"}, "handler": "runc",
     "overhead": {"podFixed": {"cpu": "10m"}}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "it.csi.k8s.io"},
     "spec": {"attachRequired": False, "podInfoOnMount": True, "volumeLifecycleModes": ["Persistent"]}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "it-node"},
     "spec": {"drivers": [{"name": "it.csi.k8s.io", "nodeID": "it-node", "topologyKeys": ["zone"],
                           "allocatable": {"count": 8}}]}},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "it-node", "namespace": NS},
     "spec": {"holderIdentity": "it-node", "leaseDurationSeconds": 40, "renewTime": "2026-01-02T03:04:05.123456Z"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "it-secret", "namespace": NS},
     "data": {"token": "AP9oaQ=="}, "type": "Opaque"},
    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
     "metadata": {"name": "it-web-abc", "namespace": NS, "labels": {"kubernetes.io/service-name": "it-web"}},
     "addressType": "IPv4",
     "endpoints": [{"addresses": ["10.128.1.5"], "conditions": {"ready": True, "serving": True, "terminating": False},
                    "nodeName": "it-node", "targetRef": {"kind": "Pod", "namespace": NS, "name": "web-1"}}],
     "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "it-event", "namespace": NS},
     "eventTime": "2026-01-02T03:04:05.000001Z", "reportingController": "k8s-loadtest/it",
     "reportingInstance": "it-1", "action": "Started", "reason": "Started", "type": "Normal", "note": "started",
     "regarding": {"kind": "Pod", "namespace": NS, "name": "web-1"}},
]
# what a LIST of each is asked in: (resource key, namespace); servicecidrs and services hold the apiserver's own
KINDS = [("runtimeclasses", ""), ("csidrivers", ""), ("csinodes", ""), ("leases", NS), ("secrets", NS),
         ("endpointslices", NS), ("events.events.k8s.io", NS), ("servicecidrs", ""), ("services", NS),
         ("podcertificaterequests", "")]




@pytest.fixture()
def written(rest: RestClient) -> Iterator[None]:
    for manifest in MANIFESTS:
        rest.create(resource_path(_resource(manifest), manifest["metadata"].get("namespace", "")), manifest,
                    exist_ok=True)
    yield
    for manifest in MANIFESTS:
        rest.delete(object_path(manifest))


def _resource(manifest: dict[str, Any]) -> str:
    return next(key for key, api in RESOURCES.items()
                if (api.api_version, api.kind) == (manifest["apiVersion"], manifest["kind"]))


@pytest.mark.parametrize(("resource", "namespace"), KINDS, ids=[k for k, _ in KINDS])
def test_a_protobuf_list_is_every_value_of_the_json_one(rest: RestClient, written: None, resource: str,
                                                        namespace: str) -> None:
    as_json = rest.list_all(resource, namespace).items or []
    as_protobuf = rest.list_all(resource, namespace, encoding="protobuf").items or []
    if resource != "podcertificaterequests":  # served, and empty: a PodCertificateRequest needs a running pod
        assert as_json, resource
    assert [o["metadata"]["name"] for o in as_protobuf] == [o["metadata"]["name"] for o in as_json]
    for protobuf_form, json_form in zip(as_protobuf, as_json, strict=True):
        protobuf, plain = leaves(protobuf_form), leaves(json_form)
        typed = {k: (type(v), v) for k, v in protobuf.items()}
        # every value of the JSON form, the same and of the same type; what protobuf adds: the empty values of
        # fields Go leaves out of JSON (omitempty)
        assert {k: typed.get(k) for k in plain} == {k: (type(v), v) for k, v in plain.items()}, resource
        added = {k: v for k, v in protobuf.items() if k not in plain}
        assert not any(added.values()), (resource, added)
