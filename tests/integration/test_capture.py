"""`loadtest capture` against a real control plane, as a user runs it on an existing cluster: objects of several
kinds, a custom resource among them, each carrying recognisable strings; the profile counts them, holds none of
those strings, measures sizes as the apiserver serves them, and the capture changes nothing it read."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtests.capture import profile as profile_mod
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.processes import wait_for
from loadtests.kube.rest import RestClient
from tests.cli import loadtest

pytestmark = pytest.mark.integration

CONTEXT = "loadtest"  # the context of the kubeconfig a local control plane writes
PLANTED = f"zqx{secrets.token_hex(4)}"  # in names, values, label keys and values, annotations, data, spec
GROUP = "capture.loadtest.example.com"
CRD = f"gizmos.{GROUP}"
NAMESPACE = f"{PLANTED}-ns"
GIZMOS = f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/gizmos"


def planted(name: str) -> dict[str, Any]:
    return {"name": f"{PLANTED}-{name}", "labels": {f"{PLANTED}.example.com/team": f"{PLANTED}-label"},
            "annotations": {"note": f"{PLANTED}-annotation"}}


def crd() -> dict[str, Any]:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": CRD},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def established(rest: RestClient) -> bool:
    conditions = rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}").get("status", {})
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions.get("conditions", []))


@pytest.fixture()
def their_objects(rest: RestClient) -> Iterator[None]:
    """Objects of several kinds with planted strings, removed afterwards (the namespace with what it holds, and
    the definition with its custom resources)."""
    namespaced = f"/api/v1/namespaces/{NAMESPACE}"
    try:
        rest.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        rest.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd())
        for i in range(3):
            rest.create(f"{namespaced}/configmaps", {"metadata": planted(f"cm-{i}"), "data": {"k": f"{PLANTED}<&>"}})
        for i in range(2):
            rest.create(f"{namespaced}/secrets", {"metadata": planted(f"secret-{i}"),
                                                  "stringData": {"password": f"{PLANTED}-secret"}})
        rest.create(f"{namespaced}/pods", {"metadata": planted("pod"), "spec": {
            "nodeName": f"{PLANTED}-node", "containers": [
                {"name": "a", "image": "x", "env": [{"name": "E", "value": f"{PLANTED}-env"}]},
                {"name": "b", "image": "y"}]}})
        wait_for(lambda: established(rest), 30, f"{CRD} established")
        for i in range(3):
            rest.create(GIZMOS, {"apiVersion": f"{GROUP}/v1", "kind": "Gizmo", "metadata": planted(f"gizmo-{i}"),
                                 "spec": {"secret": f"{PLANTED}<&>", "size": 3}})
        # the namespace's own ConfigMap, which a controller adds: there before the capture, so nothing changes
        wait_for(lambda: bool(rest.request("GET", f"{namespaced}/configmaps/kube-root-ca.crt", ok=(404,))), 30,
                 "kube-root-ca.crt in the test's namespace")
        yield
    finally:
        rest.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
        rest.delete(f"/api/v1/namespaces/{NAMESPACE}")


def resource_versions(rest: RestClient) -> dict[str, str]:
    """The resourceVersion of every object the test made that nothing else changes (its pod aside: the pod
    garbage collector may remove a pod bound to a node that does not exist), by path."""
    collections = (f"/api/v1/namespaces/{NAMESPACE}/configmaps", f"/api/v1/namespaces/{NAMESPACE}/secrets", GIZMOS)
    found = {f"{path}/{item['metadata']['name']}": item["metadata"]["resourceVersion"]
             for path in collections for item in rest.get(path).get("items", [])}
    for path in (f"/api/v1/namespaces/{NAMESPACE}", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}"):
        found[path] = rest.get(path)["metadata"]["resourceVersion"]
    assert len(found) == 3 + 1 + 2 + 3 + 2
    return found


def served_sizes(rest: RestClient, path: str) -> list[int]:
    """The bytes a GET of each object of a collection answers, its closing newline aside."""
    headers = {**rest.headers, **rest.access.auth_headers()}
    sizes = []
    for item in rest.get(path).get("items", []):
        body = rest.pool.request("GET", f"{rest.access.server}{path}/{item['metadata']['name']}", headers=headers)
        assert body.status == 200
        sizes.append(len(body.data.rstrip(b"\n")))
    return sorted(sizes)


@pytest.mark.usefixtures("their_objects")
def test_capture_counts_what_the_cluster_holds_says_nothing_private_and_changes_nothing(
        control_plane: TargetInfo, rest: RestClient, tmp_path: Path) -> None:
    before = resource_versions(rest)
    out = tmp_path / "profile.yaml"
    kubeconfig = control_plane.access.kubeconfig
    done = loadtest("capture", "--kubeconfig", kubeconfig, "--context", CONTEXT, "--allow-context", CONTEXT,
                    "--out", str(out), "--window", "1", timeout=60)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert PLANTED not in text
    assert resource_versions(rest) == before  # nothing it read was written to
    found = profile_mod.load(out)
    assert set(found.capture.requests) <= {"GET", "LIST"} and found.capture.objects_read > 0
    gizmos = found.kind("Gizmo", GROUP)
    assert gizmos is not None and (gizmos.count, gizmos.namespaces, gizmos.scope) == (3, 1, "Namespaced")
    assert gizmos.crd == profile_mod.CrdFigures(["v1"], "v1") and gizmos.labels is not None
    assert gizmos.labels.max == 1 and gizmos.annotations is not None and gizmos.annotations.max >= 1
    sizes = served_sizes(rest, GIZMOS)
    assert gizmos.size_bytes is not None and (gizmos.size_bytes.p50, gizmos.size_bytes.max) == (sizes[1], sizes[2])
    # kinds other tests' objects share: at least the test's, and a namespace holding as many as the test's
    for kind, made in (("ConfigMap", 3 + 1), ("Secret", 2), ("Pod", 1)):
        figures = found.kind(kind)
        assert figures is not None and figures.count >= made and figures.namespaces
        assert figures.per_namespace is not None and (figures.per_namespace.max or 0) >= made
    pods = found.kind("Pod")
    assert pods is not None and pods.pods is not None and pods.pods.containers.max == 2
    assert found.kind("Namespace") is not None and not any(s.resource == "gizmos" for s in found.skipped)
    # the apiserver's default RBAC, made at bootstrap: counted as the control plane's, the test's Gizmos not
    roles = found.kind("ClusterRole", "rbac.authorization.k8s.io")
    assert roles is not None and 0 < (roles.control_plane or 0) <= roles.count and gizmos.control_plane == 0
    # the traffic of a 1-second window, from two scrapes of the apiserver's /metrics: what, never who
    traffic = found.traffic
    assert traffic is not None and traffic["client_classes"] == "unknown" and traffic["window"]["seconds"] >= 1
    # the scheduler's and the controllers' watches of pods, open at both scrapes
    assert any(w["resource"] == "pods" and w["open_at_start"] and w["open_at_end"] for w in traffic["watches"])
    print(f"capture: {found.capture.objects_read} objects, {found.capture.seconds} s, peak RSS "
          f"{found.capture.peak_rss_bytes} bytes (at start {found.capture.rss_at_start_bytes})")
