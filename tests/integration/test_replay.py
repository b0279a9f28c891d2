"""A captured profile replayed on a real control plane, at the smallest scale that shows it: the compiled plan's
CRD installed permissive, its objects made at the captured counts over the captured namespaces with sizes as
served within the captured quantiles, a node of a captured shape made Ready by kwok with its figures, and
everything of it gone again afterwards."""

from __future__ import annotations

from pathlib import Path

from loadtests.capture.harness import without_harness_labels
from loadtests.capture.objects import served_size
from loadtests.capture.profile import CaptureFigures, CrdFigures, KindProfile, NodeShape, Profile, Quantiles
from loadtests.capture.replay import plan_of
from loadtests.controlplane.base import TargetInfo
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.polling import poll_until
from loadtests.results.distribution import Distribution
from loadtests.run.fleet import FLEET_USER_AGENT, Fleet
from loadtests.run.objects import ObjectsSetup

CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/sprockets.replay.example.com"


def _kind(kind: str, group: str, resource: str, count: int, sizes: tuple[int, int, int, int], **more) -> KindProfile:
    namespaced = more.pop("namespaced", True)
    return KindProfile(group=group, version="v1", kind=kind, resource=resource,
                       scope="Namespaced" if namespaced else "Cluster", count=count,
                       namespaces=2 if namespaced else None,
                       per_namespace=Quantiles(2, count // 3, count - count // 3, count - count // 3,
                                               count - count // 3) if namespaced else None,
                       size_bytes=Quantiles(count, *sizes), without_owner=count, **more)


def _profile() -> Profile:
    shapes = [NodeShape(2, {"cpu": "4", "memory": "16Gi", "pods": "110"}, {"cpu": "3500m", "memory": "15Gi",
                                                                          "pods": "110"}, [], 6),
              NodeShape(1, {"cpu": "8", "memory": "32Gi", "pods": "58"}, {"cpu": "7", "memory": "30Gi", "pods": "58"},
                        [{"key": "private-00aa11bb22cc", "effect": "NoSchedule"}], 9)]
    figures = CaptureFigures(started_at="2026-01-01T00:00:00.000+00:00", seconds=1.0, server_version="v1.37.2",
                             objects_read=1, pages_read=1, page_limit=500, requests={"LIST": 1},
                             peak_rss_since="capture start")
    return Profile(capture=figures, kinds=[
        _kind("Node", "", "nodes", 3, (3000, 3000, 3000, 3000), namespaced=False, nodes=shapes),
        _kind("Namespace", "", "namespaces", 2, (300, 300, 300, 300), namespaced=False),
        _kind("ConfigMap", "", "configmaps", 26, (1200, 3000, 6000, 6000)),
        _kind("Sprocket", "replay.example.com", "sprockets", 12, (900, 1500, 2500, 2500),
              crd=CrdFigures(["v1"], "v1")),
    ])


def test_a_profile_replays_its_objects_and_shapes(control_plane: TargetInfo, tmp_path: Path) -> None:
    profile = _profile()
    plan = plan_of(profile, 1, source=str(tmp_path / "prod.yaml"), duration_s=5)
    client = RestClient(control_plane.access, user_agent=FLEET_USER_AGENT)  # the field manager of a run's objects
    run = "it-replay"
    made = ObjectsSetup(client, plan.load, run, plan.source)
    # the scenario's namespaces (their root CAs come with them) and the harness's are not the cluster's own
    homes = ",".join(f"metadata.namespace!={ns}" for ns in ("loadtest-objects-0", "loadtest-objects-1",
                                                             *objects.NAMESPACES))

    def theirs() -> int:  # the cluster's own ConfigMaps (a new namespace's root CA comes a moment after it)
        return len(client.request("GET", "/api/v1/configmaps", params={"fieldSelector": homes})["items"])

    before = theirs()
    try:
        made.prepare(plan.steps[0].nodes)
        crd = client.get(CRD)
        assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"]
        ours = f"k8s-loadtest/run={run}"
        # the cluster's own ConfigMaps count toward the captured 24 (26 less the 2 namespaces' roots): top_up
        made_maps = len(client.request("GET", "/api/v1/configmaps", params={"labelSelector": ours})["items"])
        after = theirs()
        assert before > 0 and max(0, 24 - after) <= made_maps <= 24 - before, (made_maps, before, after)
        captured = profile.kind("Sprocket", "replay.example.com").size_bytes
        listed = client.request("GET", "/apis/replay.example.com/v1/sprockets", params={"labelSelector": ours})["items"]
        assert len(listed) == 12  # a kind the cluster had none of: all of them
        assert {o["metadata"]["namespace"] for o in listed} == {"loadtest-objects-0", "loadtest-objects-1"}
        # the captured namespaces × k made, whatever the kinds spread over: the Namespaces' count is the original's
        assert sorted(made.namespaces) == ["loadtest-objects-0", "loadtest-objects-1"]
        # sized as a capture sizes the objects a replay makes: without the harness's own labels
        sizes = Distribution.of([served_size(without_harness_labels(o), "Sprocket", "replay.example.com/v1")
                                 for o in listed], "")
        for got, wanted in ((sizes.p50, captured.p50), (sizes.p99, captured.p99)):
            assert abs(got - wanted) <= 0.1 * wanted, (got, wanted)
        _a_shaped_node_is_ready(client, plan.fleet)
    finally:
        problems = made.remove()
    assert problems == []
    assert not client.request("GET", CRD, ok=(404,))
    assert not [n for n in client.list_items("namespaces", label_selector=objects.MANAGED_BY_SELECTOR)
                if n["metadata"]["name"].startswith(objects.NS_OBJECTS_PREFIX)]


def _a_shaped_node_is_ready(client: RestClient, shapes) -> None:
    """The tainted shape's node, made under a name of its own (the shared fleet's nodes are the template's)."""
    fleet = Fleet(client, shapes)
    index = next(i for i in range(3) if shapes.of(i).taints)
    node = fleet.node("kwok-replay-shaped", index)
    client.create("/api/v1/nodes", node)
    try:
        def ready() -> bool:
            found = client.get("/api/v1/nodes/kwok-replay-shaped")
            return any(c["type"] == "Ready" and c["status"] == "True" for c in found["status"].get("conditions", []))

        assert poll_until(ready, 60, interval_s=0.2)
        found = client.get("/api/v1/nodes/kwok-replay-shaped")
        assert found["status"]["allocatable"] == {"cpu": "7", "memory": "30Gi", "pods": "58"}
        assert ("private-00aa11bb22cc", "NoSchedule") in {(t["key"], t["effect"]) for t in found["spec"]["taints"]}
        assert len(found["metadata"]["labels"]) == 9
    finally:
        client.delete("/api/v1/nodes/kwok-replay-shaped")
