"""The objects part of a capture: each object's figures, their quantiles, node shapes and pods, the profile's
schema, and that nothing private of the objects reaches the written profile."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtests.capture import profile as profile_mod
from loadtests.capture.objects import (
    Interned,
    KindTally,
    NodeTally,
    PodTally,
    served_size,
    taint_key,
)
from loadtests.capture.profile import SCHEMA, CaptureFigures, Profile, Quantiles
from loadtests.capture.take import cluster_role, take
from loadtests.cli.main import main
from loadtests.errors import LoadTestError
from loadtests.kube.discovery import Kind
from loadtests.kube.errors import ApiError

SALT = b"unit-test-salt"


def go_json_size(obj: dict[str, Any]) -> int:
    """The bytes Go's encoding/json writes for an object (what the apiserver serves), without its newline."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return len(text.encode())


def test_quantiles_are_nearest_rank_over_every_number() -> None:
    assert Quantiles.of(range(1, 101)) == Quantiles(count=100, p50=50, p90=90, p99=99, max=100)
    assert Quantiles.of([7]) == Quantiles(count=1, p50=7, p90=7, p99=7, max=7)
    assert Quantiles.of([]) == Quantiles(count=0)
    assert Quantiles.of([5, 1, 3, 2, 4]).p50 == 3


def test_an_objects_size_is_its_json_as_a_get_serves_it() -> None:
    """A LIST's item of a built-in kind lacks kind and apiVersion, which a GET puts first; Go escapes <, >, & and
    the line separators that a compact re-encoding would write as they are."""
    item = {"metadata": {"name": "a", "annotations": {"x": "<b>&amp; caf\u00e9 \u2028"}}, "data": {"k": "v\n\t"}}
    assert served_size(item, "ConfigMap", "v1") == go_json_size({"kind": "ConfigMap", "apiVersion": "v1", **item})
    custom = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"n": 3}}
    assert served_size(custom, "Widget", "example.com/v1") == go_json_size(custom)


def tally_of(kind: Kind, objects: list[dict[str, Any]], served: dict[tuple[str, str], str] | None = None
             ) -> KindTally:
    tally = KindTally(kind, served or {("apps", "ReplicaSet"): "ReplicaSet.apps", ("", "Node"): "Node"})
    namespaces = Interned()
    for obj in objects:
        tally.add(obj, namespaces)
    return tally


def meta(name: str, namespace: str = "", **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **({"namespace": namespace} if namespace else {}), **fields}}


def test_a_kinds_figures_per_namespace_labels_annotations_and_owners() -> None:
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1"}]
    objects = [meta(f"p{i}", "ns-a", labels={"app": "web", "tier": "x"}, ownerReferences=owner) for i in range(3)]
    objects.append(meta("q", "ns-b", annotations={"note": "abc"},
                        ownerReferences=[{"apiVersion": "made.up/v1", "kind": "SecretProject", "name": "n"}]))
    objects.append(meta("r", "ns-b"))
    found = tally_of(Kind("v1", "Pod", "pods", True), objects).profile()
    assert (found.count, found.namespaces, found.scope) == (5, 2, "Namespaced")
    assert found.per_namespace == Quantiles(count=2, p50=2, p90=3, p99=3, max=3)
    assert found.labels == Quantiles(count=5, p50=2, p90=2, p99=2, max=2)
    assert found.label_bytes is not None and found.label_bytes.max == len("appwebtierx")
    assert found.annotation_bytes is not None and found.annotation_bytes.max == len("noteabc")
    # an owner's kind is written only when the cluster serves it: a reference's kind is free text
    assert found.owners == {"ReplicaSet.apps": 3, "other": 1} and found.without_owner == 1


def test_a_kind_without_objects_has_a_count_and_no_quantiles() -> None:
    found = tally_of(Kind("example.com/v1", "Widget", "widgets", False), []).profile()
    assert (found.count, found.namespaces, found.size_bytes, found.group, found.version) == \
        (0, None, None, "example.com", "v1")


def node(name: str, cpu: str = "4", memory: str = "16Gi", allocatable_cpu: str = "4",
         taints: list[dict[str, str]] | None = None, labels: int = 3) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"metadata": {"name": name, "labels": {f"l{i}": "v" for i in range(labels)}},
            "spec": {"taints": taints or []},
            "status": {"capacity": resources, "allocatable": {**resources, "cpu": allocatable_cpu}}}


def test_nodes_group_by_shape_most_common_first() -> None:
    tally = NodeTally(Interned(), SALT)
    for n in range(3):
        tally.add(node(f"n{n}"))
    tally.add(node("small", allocatable_cpu="3500m"))
    tally.add(node("tainted", taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
                                      {"key": "team.example.com/gpu", "value": "yes", "effect": "NoExecute"}]))
    tally.add(node("bare", labels=5))
    shapes = tally.shapes_found()
    assert [s.count for s in shapes] == [3, 1, 1, 1]
    assert shapes[0].capacity == shapes[0].allocatable == {"cpu": "4", "memory": "16Gi", "pods": "110"}
    assert shapes[0].taints == [] and shapes[0].labels == 3
    assert {"cpu": "3500m", "memory": "16Gi", "pods": "110"} in [s.allocatable for s in shapes]
    tainted = next(s for s in shapes if s.taints)
    keys = {t["key"]: t["effect"] for t in tainted.taints}
    assert keys["node-role.kubernetes.io/control-plane"] == "NoSchedule"
    private = [k for k in keys if k.startswith("private-")]
    assert len(private) == 1 and keys[private[0]] == "NoExecute" and "team" not in private[0]
    assert sorted(s.labels for s in shapes) == [3, 3, 3, 5]


def test_taint_keys_outside_kubernetes_domains_are_hashed_per_capture() -> None:
    for public in ("node.kubernetes.io/not-ready", "kwok.x-k8s.io/node", "k8s.io/x"):
        assert taint_key(public, SALT) == public
    private = taint_key("dedicated", SALT)
    assert private.startswith("private-") and private == taint_key("dedicated", SALT)
    assert taint_key("dedicated", b"another capture") != private
    assert taint_key("evil-kubernetes.io/x", SALT).startswith("private-")


def test_pods_per_node_counts_nodes_without_pods_and_unknown_phases() -> None:
    nodes = Interned()
    node_tally = NodeTally(nodes, SALT)
    for name in ("a", "b", "c"):
        node_tally.add(node(name))
    pods = PodTally(nodes)
    spread = ["a"] * 4 + ["b"] * 2 + ["gone"]  # c holds none; "gone" is named by a pod but not listed
    for i, where in enumerate(spread):
        pods.add({"spec": {"nodeName": where, "containers": [{}] * (1 + i % 2)}, "status": {"phase": "Running"}})
    pods.add({"spec": {"containers": [{}], "initContainers": [{}]}, "status": {"phase": "Pending"}})
    pods.add({"spec": {"containers": [{}]}, "status": {"phase": "Bogus"}})
    figures = pods.figures(node_tally.node_ids)
    assert figures.per_node == Quantiles(count=4, p50=1, p90=4, p99=4, max=4) and figures.nodes == 4
    assert figures.unscheduled == 2
    assert figures.phases == {"Running": 7, "Pending": 1, "other": 1}
    assert figures.containers.max == 2 and figures.init_containers == Quantiles(9, 0, 1, 1, 1)


# --- a whole capture of a constructed cluster: pages, discovery, CRDs, and what is never written ---------------

PLANTED = "zqxplanted"  # in every name, value, label value, annotation value, data, namespace and node name

KINDS = {  # api_version -> [(kind, resource, namespaced)]
    "v1": [("Namespace", "namespaces", False), ("ConfigMap", "configmaps", True), ("Secret", "secrets", True),
           ("Pod", "pods", True), ("Node", "nodes", False), ("Binding", "bindings", True)],
    "apiextensions.k8s.io/v1": [("CustomResourceDefinition", "customresourcedefinitions", False)],
    "example.com/v1": [("Gadget", "gadgets", True)],
    "metrics.k8s.io/v1beta1": [("PodMetrics", "pods", True)],
    "apiregistration.k8s.io/v1": [("APIService", "apiservices", False)],
    "events.k8s.io/v1": [("Event", "events", True)],
}


def planted_meta(i: int, namespace: str = "") -> dict[str, Any]:
    return meta(f"{PLANTED}-name-{i}", namespace, labels={f"{PLANTED}.example.com/key": f"{PLANTED}-value"},
                annotations={"note": f"{PLANTED}-annotation"}, uid=f"{PLANTED}-uid-{i}")


def planted_objects() -> dict[str, list[dict[str, Any]]]:
    namespaces = [f"{PLANTED}-ns-{i}" for i in range(3)]
    crd = {**planted_meta(99), "spec": {"group": "example.com", "scope": "Namespaced",
                                        "names": {"plural": "gadgets", "kind": "Gadget"},
                                        "versions": [{"name": "v1", "served": True, "storage": True},
                                                     {"name": "v0", "served": False, "storage": False}]}}
    service = {"spec": {"group": "metrics.k8s.io", "version": "v1beta1", "service": {"name": "metrics-server"}}}
    return {
        "/api/v1/namespaces": [{**planted_meta(i), "metadata": {"name": ns}} for i, ns in enumerate(namespaces)],
        "/api/v1/configmaps": [{**planted_meta(i, namespaces[i % 3]), "data": {"k": f"{PLANTED}-data"}}
                               for i in range(7)],
        "/api/v1/secrets": [{**planted_meta(i, namespaces[0]), "data": {"k": "enFxeHBsYW50ZWQ="},
                             "stringData": {"k": f"{PLANTED}-secret"}} for i in range(2)],
        "/api/v1/pods": [{**planted_meta(i, namespaces[1]),
                          "spec": {"nodeName": f"{PLANTED}-node-{i % 2}",
                                   "containers": [{"name": PLANTED, "env": [{"name": "X", "value": PLANTED}]}]},
                          "status": {"phase": "Running", "podIP": PLANTED}} for i in range(5)],
        "/api/v1/nodes": [{**node(f"{PLANTED}-node-{i}", taints=[{"key": f"{PLANTED}/t", "value": PLANTED,
                                                                     "effect": "NoSchedule"}]),
                           "metadata": {**planted_meta(i)["metadata"], "name": f"{PLANTED}-node-{i}"}}
                          for i in range(2)],
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions": [crd],
        "/apis/example.com/v1/gadgets": [{"apiVersion": "example.com/v1", "kind": "Gadget",
                                          **planted_meta(i, namespaces[2]), "spec": {"secret": PLANTED}}
                                         for i in range(4)],
        "/apis/apiregistration.k8s.io/v1/apiservices": [service],
    }


@dataclass
class Access:
    server: str = "https://127.0.0.1:6443"


@dataclass
class ConstructedCluster:
    """Discovery and paginated LISTs of constructed objects, behind the RestClient calls a capture makes."""

    objects: dict[str, list[dict[str, Any]]]
    forbidden: set[str] = field(default_factory=set)
    access: Access = field(default_factory=Access)
    headers: dict[str, str] = field(default_factory=lambda: {"User-Agent": "unit"})
    calls: list[tuple[str, str]] = field(default_factory=list)

    def sent(self) -> dict[tuple[str, str], int]:
        return {("LIST", "all"): sum(1 for verb, _ in self.calls if verb == "LIST"),
                ("GET", "all"): sum(1 for verb, _ in self.calls if verb == "GET")}

    def get(self, path: str, **_query: Any) -> dict[str, Any]:
        self.calls.append(("GET", path))
        if path == "/version":
            return {"gitVersion": "v1.37.2"}
        if path == "/api":
            return {"versions": ["v1"]}
        if path == "/apis":
            return {"groups": [{"preferredVersion": {"groupVersion": v}} for v in KINDS if v != "v1"]}
        version = path.removeprefix("/api/").removeprefix("/apis/")
        return {"resources": [{"name": r, "kind": k, "namespaced": n, "verbs": ["create"] if k == "Binding" else
                               ["get", "list", "watch"]} for k, r, n in KINDS[version]]
                + [{"name": f"{r}/status", "kind": k, "verbs": ["get"]} for k, r, _n in KINDS[version]]}

    def list_pages(self, path: str, query: dict[str, Any]) -> Any:
        self.calls.append(("LIST", path))
        if path in self.forbidden:
            raise ApiError(403, f"{PLANTED} may not list", "GET", path)
        items, limit = self.objects.get(path, []), query["limit"]
        for start in range(0, max(1, len(items)), limit):
            yield {"metadata": {"continue": "more" if start + limit < len(items) else ""},
                   "items": [json.loads(json.dumps(item)) for item in items[start:start + limit]]}


def test_a_capture_writes_no_name_value_or_label_value_of_the_cluster(tmp_path: Path) -> None:
    cluster = ConstructedCluster(planted_objects(), forbidden={"/api/v1/secrets"})
    found = take(cluster, page_limit=2, salt=SALT)  # type: ignore[arg-type]
    text = found.write(tmp_path / "profile.yaml").read_text()
    assert PLANTED not in text and "enFxeHBsYW50ZWQ" not in text
    assert all(verb in ("GET", "LIST") for verb, _path in cluster.calls)
    counts = {(k.group, k.kind): k.count for k in found.kinds}
    assert counts == {("", "Namespace"): 3, ("", "ConfigMap"): 7, ("", "Pod"): 5, ("", "Node"): 2,
                      ("apiextensions.k8s.io", "CustomResourceDefinition"): 1, ("example.com", "Gadget"): 4,
                      ("apiregistration.k8s.io", "APIService"): 1}
    configmaps = found.kind("ConfigMap")
    assert configmaps is not None and configmaps.namespaces == 3
    assert configmaps.per_namespace == Quantiles(3, 2, 3, 3, 3)
    gadget = found.kind("Gadget", "example.com")
    assert gadget is not None and gadget.crd == profile_mod.CrdFigures(["v1"], "v1") and gadget.scope == "Namespaced"
    pods = found.kind("Pod")
    assert pods is not None and pods.pods is not None and pods.pods.per_node == Quantiles(2, 2, 3, 3, 3)
    reasons = {(s.group, s.resource): s.reason for s in found.skipped}
    assert set(reasons) == {("", "secrets"), ("metrics.k8s.io", "*"), ("events.k8s.io", "events")}
    assert reasons[("", "secrets")].startswith("forbidden")
    # one page of 2 at a time: 7 configmaps are 4 pages
    assert found.capture.objects_read == 23 and found.capture.pages_read == 14
    assert found.capture.requests == {"GET": 8, "LIST": 9}


def figures() -> CaptureFigures:
    return CaptureFigures(started_at="2026-01-01T00:00:00.000+00:00", seconds=1.5, server_version="v1.37.2",
                          objects_read=3, pages_read=1, page_limit=500, requests={"LIST": 2},
                          rss_at_start_bytes=1, peak_rss_bytes=2, peak_rss_since="capture start")


def test_a_profile_reads_back_as_it_was_written(tmp_path: Path) -> None:
    written = Profile(capture=figures(), kinds=[tally_of(Kind("v1", "Pod", "pods", True),
                                                          [meta("a", "n")]).profile()],
                      traffic={"window_s": 60, "classes": []})
    path = written.write(tmp_path / "p.yaml")
    data = yaml.safe_load(path.read_text())
    assert list(data) == ["schema", "capture", "kinds", "skipped", "traffic"] and data["schema"] == SCHEMA
    assert profile_mod.load(path) == written
    assert "traffic" not in Profile(capture=figures()).to_dict()
    unmeasured = Profile(capture=dataclasses.replace(figures(), rss_at_start_bytes=None, peak_rss_bytes=None))
    assert profile_mod.load(unmeasured.write(tmp_path / "q.yaml")) == unmeasured  # left out, read back as None


@pytest.mark.parametrize("schema", ["k8s-loadtest/profile/v2", None])
def test_a_profile_of_another_schema_is_refused_in_one_line(tmp_path: Path, schema: str | None) -> None:
    data = Profile(capture=figures()).to_dict()
    data["schema"] = schema
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(LoadTestError) as refused:
        profile_mod.load(path)
    line = str(refused.value)
    assert "\n" not in line and str(path) in line and SCHEMA in line


def test_the_capture_role_only_reads() -> None:
    role = cluster_role()
    assert role["kind"] == "ClusterRole"
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list"}
    assert any("/metrics" in rule.get("nonResourceURLs", ()) for rule in role["rules"])


def test_print_rbac_prints_the_role(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capture", "--print-rbac"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == cluster_role()


@pytest.mark.parametrize("args, words", [
    (["--audit-log", "audit.log", "--window", "60", "--out", "p.yaml"], "--audit-log and --window"),
    (["--audit-log", "missing.log", "--out", "p.yaml"], "missing.log"),  # refused before the cluster is asked
    (["--audit-log", "kc", "--out", "p.yaml"], "not an audit log"),
    (["--window", "0", "--out", "p.yaml"], "positive number of seconds"),
    (["--kubeconfig", "kc", "--out", "p.yaml"], "kc"),  # the existing-cluster guard: no context named
    (["--name", "x"], "--out"),
])
def test_capture_refuses_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str],
                                     words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kc").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "contexts": []}))
    assert main(["capture", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


RBAC = "rbac.authorization.k8s.io"
BOOTSTRAPPING = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
APISERVER_SERVICE = {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}
# (kind, the control plane's objects at bootstrap, its marker on them, planted objects without it: lookalikes)


def managed_by(name: str) -> dict[str, Any]:
    """A managedFields entry of one field manager."""
    return {"manager": name, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1"}


BOOTSTRAP_KINDS = [
    (Kind(f"{RBAC}/v1", "ClusterRole", "clusterroles", False),
     [meta("admin", labels=BOOTSTRAPPING), meta("system:node", labels=BOOTSTRAPPING)],
     [meta("team-reader"), meta("mine", labels={"kubernetes.io/bootstrapping": "another-value"})]),
    (Kind(f"{RBAC}/v1", "RoleBinding", "rolebindings", True),
     [meta("system:controller:token-cleaner", "kube-system", labels=BOOTSTRAPPING)], [meta("x", "kube-system")]),
    (Kind("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "flowschemas", False),
     [meta("exempt", annotations={"apf.kubernetes.io/autoupdate-spec": "true"}),
      meta("probes", annotations={"apf.kubernetes.io/autoupdate-spec": "false"})], [meta("team-schema")]),
    (Kind("apiregistration.k8s.io/v1", "APIService", "apiservices", False),
     [meta("v1.apps", labels={AUTOMANAGED: "onstart"})],
     [meta("v1.example.com", labels={AUTOMANAGED: "true"}), meta("v1beta1.metrics.k8s.io")]),
    (Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
     [meta("system-cluster-critical"), meta("system-node-critical")], [meta("high"), meta("team-system-x")]),
    (Kind("v1", "Namespace", "namespaces", False), [meta("default"), meta("kube-system")], [meta("team-a")]),
    (Kind("v1", "Service", "services", True),
     [meta("kubernetes", "default", labels={"provider": "kubernetes", "component": "apiserver"})],
     [meta("kubernetes", "team-a"), meta("web", "default", labels={"component": "apiserver"})]),
    (Kind("networking.k8s.io/v1", "IPAddress", "ipaddresses", False),
     [{**meta("10.96.0.1"), "spec": {"parentRef": APISERVER_SERVICE}}],
     [{**meta("10.96.0.9"), "spec": {"parentRef": {**APISERVER_SERVICE, "name": "web"}}}]),
    (Kind("certificates.k8s.io/v1beta1", "ClusterTrustBundle", "clustertrustbundles", False),
     [{**meta("kubernetes.io:kube-apiserver-serving:1"),
       "spec": {"signerName": "kubernetes.io/kube-apiserver-serving"}}],
     [{**meta("example.com:ca:1"), "spec": {"signerName": "example.com/ca"}}]),
    (Kind("coordination.k8s.io/v1", "Lease", "leases", True),
     [meta("apiserver-a", "kube-system", labels={"apiserver.kubernetes.io/identity": "kube-apiserver"})],
     [meta("node-a", "kube-node-lease"), meta("kube-scheduler", "kube-system")]),
    (Kind("v1", "ComponentStatus", "componentstatuses", False), [meta("scheduler"), meta("etcd-0")], []),
    # a system namespace's defaults (made with it at bootstrap), and what the control plane's components alone
    # wrote there (their field managers); another namespace's defaults are namespace_defaults
    (Kind("v1", "ConfigMap", "configmaps", True),
     [meta("kube-root-ca.crt", "kube-system"),
      meta("extension-apiserver-authentication", "kube-system", managedFields=[managed_by("kube-apiserver")])],
     [meta("coredns", "kube-system", managedFields=[managed_by("kubeadm")]), meta("kube-root-ca.crt", "team-a"),
      meta("settings", "team-a", managedFields=[managed_by("kube-controller-manager")]),
      meta("cluster-info", "kube-public", managedFields=[managed_by("kube-apiserver"), managed_by("kubeadm")])]),
    # kube-controller-manager's controllers' ServiceAccounts name no field manager at all
    (Kind("v1", "ServiceAccount", "serviceaccounts", True),
     [meta("default", "default"), meta("default", "kube-public"), meta("replicaset-controller", "kube-system"),
      meta("ttl-controller", "kube-system", managedFields=[managed_by("kube-controller-manager")])],
     [meta("default", "team-a"), meta("deployer", "team-a"),
      meta("coredns", "kube-system", managedFields=[managed_by("kubectl-client-side-apply")])]),
]


@pytest.mark.parametrize(("kind", "made", "lookalikes"), BOOTSTRAP_KINDS, ids=[k[0].kind for k in BOOTSTRAP_KINDS])
def test_the_control_planes_bootstrap_objects_are_counted_by_their_public_markers(
        kind: Kind, made: list[dict[str, Any]], lookalikes: list[dict[str, Any]]) -> None:
    found = tally_of(kind, made + lookalikes).profile()
    assert (found.count, found.control_plane) == (len(made) + len(lookalikes), len(made))


def test_a_profile_captured_before_control_plane_reads_back_without_it(tmp_path: Path) -> None:
    written = Profile(capture=figures(), kinds=[tally_of(Kind("v1", "Pod", "pods", True), [meta("a", "n")]).profile()])
    data = written.to_dict()
    assert data["kinds"][0]["control_plane"] == 0  # a new capture writes it, 0 included
    del data["kinds"][0]["control_plane"]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data))
    assert profile_mod.load(path).kinds[0].control_plane is None


HARNESS_OBJECTS = [  # (kind, objects the load tester made, the cluster's own lookalikes)
    (Kind("v1", "ConfigMap", "configmaps", True),
     [meta("kube-root-ca.crt", "loadtest-probe"), meta("probe-1", "loadtest-probe")],
     [meta("kube-root-ca.crt", "loadtest-objects-0"), meta("probe-1", "team-a")]),
    (Kind("v1", "Namespace", "namespaces", False), [meta("loadtest-fleet"), meta("loadtest-churn")],
     [meta("loadtest-objects-0"), meta("loadtest-fleets")]),
    (Kind(f"{RBAC}/v1", "ClusterRoleBinding", "clusterrolebindings", False),
     [meta("k8s-loadtest:node-proxier"), meta("k8s-loadtest:tenant:a")], [meta("kubeadm:node-proxier")]),
    (Kind("v1", "Event", "events", True),
     [{**meta("kwok-node-3.1", "default"), "involvedObject": {"kind": "Node", "name": "kwok-node-3"}}],
     [{**meta("node-a.1", "default"), "involvedObject": {"kind": "Node", "name": "node-a"}},
      {**meta("kwok-node-3.2", "default"), "involvedObject": {"kind": "Pod", "name": "kwok-node-3"}}]),
]


@pytest.mark.parametrize(("kind", "made", "lookalikes"), HARNESS_OBJECTS, ids=[k[0].kind for k in HARNESS_OBJECTS])
def test_the_load_testers_own_objects_are_counted_apart_by_its_names(
        kind: Kind, made: list[dict[str, Any]], lookalikes: list[dict[str, Any]]) -> None:
    """A capture of a cluster the harness made (or of a replay) counts its namespaces and what is in them, its RBAC
    and its fleet's node Events apart, in no other figure: a comparison does not count them."""
    found = tally_of(kind, made + lookalikes).profile()
    assert (found.count, found.harness) == (len(made) + len(lookalikes), len(made))
    assert found.control_plane == 0  # the harness's kube-root-ca.crt is no default of the cluster's namespaces
    if kind.kind == "ConfigMap":
        assert found.namespace_defaults == 1  # the objects scenario's namespace's: the replay's own


def test_the_defaults_made_with_each_namespace_are_counted_apart_from_the_bootstrap_ones() -> None:
    """kube-root-ca.crt and the default ServiceAccount of a namespace the cluster's users made come with it (× k
    with the namespaces in a replay); a system namespace's are made once at bootstrap (control_plane)."""
    cms = tally_of(Kind("v1", "ConfigMap", "configmaps", True),
                   [meta("kube-root-ca.crt", ns) for ns in ("kube-system", "default", "team-a", "team-b")]
                   + [meta("settings", "team-a")]).profile()
    assert (cms.count, cms.control_plane, cms.namespace_defaults, cms.harness) == (5, 2, 2, 0)
    other = tally_of(Kind("v1", "Secret", "secrets", True), [meta("default", "team-a")]).profile()
    assert other.namespace_defaults is None  # a kind without defaults has no such figure


def test_the_sizes_of_the_objects_a_replay_makes_are_counted_apart() -> None:
    """made_size_bytes: the sizes of the objects without an owner that neither the control plane (at bootstrap, with
    a namespace) nor the load tester made, the ones a replay makes and pads: a replay follows them and its
    fidelity compares them, at any k, without the control plane's own (bigger, once)."""
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1"}]
    user = [meta(f"cm-{i}", "team-a") for i in range(3)]
    others = [{**meta("kube-root-ca.crt", ns), "data": {"ca.crt": "x" * 1000}} for ns in ("kube-system", "team-a")]
    others += [meta("owned", "team-a", ownerReferences=owner), meta("probe-1", "loadtest-probe")]
    tally = tally_of(Kind("v1", "ConfigMap", "configmaps", True), user + others)
    found = tally.profile()
    assert found.count == 7 and found.made_size_bytes == Quantiles.of(tally.sizes[:3])
    assert found.made_size_bytes.max < found.size_bytes.max  # the root CA's, bigger, left out
    assert tally_of(Kind("v1", "ConfigMap", "configmaps", True), others).profile().made_size_bytes == Quantiles(0)


def test_the_objects_a_replay_makes_are_sized_without_the_harnesss_labels() -> None:
    """A replay's object carries the harness's labels (and their managedFields entry), which the original's it
    stands for does not: its made size leaves them out, so small objects are compared as they were made; the bytes
    they add are kept apart (harness_label_bytes). A cluster's own managed-by label (Helm's) is the cluster's."""
    fields = {"f:data": {".": {}, "f:blob": {}}}
    bare = {**meta("cm-0", "team-a"), "data": {"blob": "x" * 100},
            "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                               "fieldsV1": fields}]}
    bare["metadata"]["managedFields"] = bare.pop("managedFields")
    ours = {"app.kubernetes.io/managed-by": "k8s-loadtest", "k8s-loadtest/run": "run-x1",
            "k8s-loadtest/scenario": "objects", "k8s-loadtest/template": "replay-0-configmaps.yaml"}
    labelled = json.loads(json.dumps(bare))
    labelled["metadata"]["labels"] = dict(ours)
    labelled["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"] = {
        "f:labels": {".": {}, **{f"f:{key}": {} for key in ours}}}
    helm = json.loads(json.dumps(bare))
    helm["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
    kind = Kind("v1", "ConfigMap", "configmaps", True)
    tally = tally_of(kind, [bare, labelled, helm])
    assert tally.made_sizes[0] == tally.made_sizes[1] == tally.sizes[0]  # the replay's as the original's
    assert tally.sizes[1] - tally.sizes[0] > 250  # what the labels and their managedFields entry add
    assert tally.made_sizes[2] == tally.sizes[2]  # Helm's label stays
    found = tally.profile()
    assert found.harness_label_bytes == Quantiles.of([tally.sizes[1] - tally.sizes[0]])
    assert labelled["metadata"]["labels"] == ours  # the object read is not changed
    assert tally_of(kind, [bare]).profile().harness_label_bytes is None
