"""Each fake node's agents as that node, on the suite's local control plane: the Node authorizer and NodeRestriction
hold a node's kubelet to its own pods, Secrets and Node, and kube-proxy has system:node-proxier's rights, no more."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from loadtests.controlplane.local import LocalControlPlane
from loadtests.controlplane.processes import wait_for
from loadtests.kube.errors import ApiError
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.paths import resource_path
from loadtests.kube.rest import RestClient

NODE_A, NODE_B = "identity-node-a", "identity-node-b"
NAMESPACE = "identity-check"
NODE_A_SECRET, OTHER_SECRET = "on-node-a", "elsewhere"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"  # not among the harness's own resources (kube/paths.py)


def status_of(send: Any, *args: Any, **kwargs: Any) -> int:
    """The HTTP status a request was answered with (200 for any success)."""
    try:
        result = send(*args, **kwargs)
    except ApiError as error:
        return error.status
    close = getattr(result, "close", None)  # a watch stream
    if close is not None:
        close()
    return 200


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NAMESPACE},
            "stringData": {"key": "not-a-secret"}}


def pod_on_a() -> dict[str, Any]:
    """A pod bound to node A that mounts NODE_A_SECRET: the only Secret node A may read."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-node-a", "namespace": NAMESPACE},
            "spec": {"nodeName": NODE_A, "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                     "volumes": [{"name": "s", "secret": {"secretName": NODE_A_SECRET}}]}}


@pytest.fixture(scope="module")
def identities(local_plane: LocalControlPlane) -> NodeIdentities:
    return local_plane.node_identities([NODE_A, NODE_B])


@pytest.fixture(scope="module")
def objects(local_plane: LocalControlPlane) -> Iterator[RestClient]:
    """As the admin: node B, a namespace with two Secrets and a pod on node A using one of them; all removed after."""
    admin = RestClient(local_plane.access())
    admin.create(resource_path("namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": NAMESPACE}})
    admin.create(resource_path("nodes"), node(NODE_B))
    for name in (NODE_A_SECRET, OTHER_SECRET):
        admin.create(SECRETS, secret(name))
    # the ServiceAccount admission refuses pods until the namespace's default ServiceAccount is made
    wait_for(lambda: bool(admin.request("GET", resource_path("serviceaccounts", NAMESPACE, "default"), ok=(404,))),
             60, "the namespace's default ServiceAccount")
    admin.create(resource_path("pods", NAMESPACE), pod_on_a())
    try:
        yield admin
    finally:
        admin.delete(resource_path("namespaces", name=NAMESPACE))
        for name in (NODE_A, NODE_B):
            admin.delete(resource_path("nodes", name=name))
        admin.close()


@pytest.fixture(scope="module")
def node_a(identities: NodeIdentities) -> Iterator[RestClient]:
    client = RestClient(identities.node_access(NODE_A))
    yield client
    client.close()


def test_a_node_lists_and_watches_only_its_own_pods(objects: RestClient, node_a: RestClient) -> None:
    own, other = f"spec.nodeName={NODE_A}", f"spec.nodeName={NODE_B}"
    listed = node_a.list_all("pods", field_selector=own)
    assert [p["metadata"]["name"] for p in listed.items or []] == ["on-node-a"]
    assert status_of(node_a.watch, "pods", field_selector=own, resource_version=listed.resource_version) == 200
    assert status_of(node_a.list_all, "pods", field_selector=other) == 403
    assert status_of(node_a.list_all, "pods") == 403
    assert status_of(node_a.watch, "pods", field_selector=other) == 403
    assert status_of(node_a.watch, "pods") == 403


def test_a_node_reads_only_the_secrets_of_its_own_pods(objects: RestClient, node_a: RestClient) -> None:
    mine = f"{SECRETS}/{NODE_A_SECRET}"
    # the Node authorizer learns of the pod's Secret from its graph, which follows the pods it watches
    wait_for(lambda: status_of(node_a.get, mine) == 200, 30, "node A allowed its pod's Secret")
    assert status_of(node_a.get, f"{SECRETS}/{OTHER_SECRET}") == 403


def test_a_node_changes_its_own_node_status_only(objects: RestClient, node_a: RestClient) -> None:
    assert status_of(node_a.create, resource_path("nodes"), node(NODE_A)) == 200  # registers itself, as a kubelet
    patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "IdentityCheck",
                                        "message": "set by the node-identity test"}]}}
    assert status_of(node_a.patch, resource_path("nodes", name=NODE_A, subresource="status"), patch) == 200
    assert status_of(node_a.patch, resource_path("nodes", name=NODE_B, subresource="status"), patch) == 403
    assert status_of(node_a.create, resource_path("nodes"), node("identity-node-c")) == 403  # nor registers another


def test_kube_proxy_lists_endpointslices_and_no_secrets(identities: NodeIdentities) -> None:
    proxy = RestClient(identities.proxy_access())
    try:
        assert status_of(proxy.list_all, "endpointslices") == 200
        assert status_of(proxy.list_all, "services") == 200
        assert status_of(proxy.get, "/api/v1/secrets") == 403
    finally:
        proxy.close()
