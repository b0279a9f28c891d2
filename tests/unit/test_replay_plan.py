"""A captured profile compiles into an ordinary plan: its nodes, shapes, pods and objects × k, objects padded to
the captured sizes, CRDs permissive, and what is not replayed listed with its count and why."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtests.capture.harness import without_harness_labels
from loadtests.capture.profile import (
    CaptureFigures,
    CrdFigures,
    KindProfile,
    NodeShape,
    PodFigures,
    Profile,
    Quantiles,
)
from loadtests.capture.replay import load_plan, plan_data, plan_of, served_extra, size_knots, spread
from loadtests.config import plan as plan_mod
from loadtests.config.scenarios import user_plan
from loadtests.config.templates import ObjectTemplate
from loadtests.errors import LoadTestError, PlanError
from loadtests.results.distribution import Distribution
from loadtests.run import fidelity


def figures() -> CaptureFigures:
    return CaptureFigures(started_at="2026-01-01T00:00:00.000+00:00", seconds=1.5, server_version="v1.37.2",
                          objects_read=3, pages_read=1, page_limit=500, requests={"LIST": 2},
                          peak_rss_since="capture start")


def kind(kind: str, group: str, resource: str, count: int, *, namespaces: int | None = 3,
         sizes: tuple[int, int, int, int] = (800, 2000, 9000, 12000), **more) -> KindProfile:
    return KindProfile(group=group, version="v1" if not group else "v1beta1", kind=kind, resource=resource,
                       scope="Namespaced" if namespaces else "Cluster", count=count, namespaces=namespaces,
                       per_namespace=Quantiles(namespaces, 5, 20, 30, 30) if namespaces else None,
                       size_bytes=Quantiles(count, *sizes), without_owner=count - sum(more.get("owners", {}).values()),
                       **more)


SHAPES = [NodeShape(3, {"cpu": "4", "memory": "16Gi", "pods": "110"}, {"cpu": "3500m", "memory": "15Gi", "pods": "110"},
                    [], 9),
          NodeShape(1, {"cpu": "8", "memory": "32Gi", "pods": "110"}, {"cpu": "8", "memory": "31Gi", "pods": "110"},
                    [{"key": "private-0123456789ab", "effect": "NoSchedule"},
                     # the node lifecycle controller's, put on by the node's conditions: not a fixed taint to replay
                     {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}], 11)]


def profile() -> Profile:
    return Profile(capture=figures(), kinds=[
        kind("Node", "", "nodes", 4, namespaces=None, nodes=SHAPES),
        kind("Namespace", "", "namespaces", 5, namespaces=None),
        kind("Pod", "", "pods", 40, owners={"ReplicaSet.apps": 36},
             pods=PodFigures(per_node=Quantiles(4, 10, 10, 10, 10), nodes=4)),
        kind("ConfigMap", "", "configmaps", 65),
        kind("Secret", "", "secrets", 10, sizes=(3000, 3000, 5000, 5000)),
        kind("ReplicaSet", "apps", "replicasets", 6, owners={"Deployment.apps": 6}),
        kind("Deployment", "apps", "deployments", 6),
        kind("Event", "", "events", 300),
        kind("Widget", "example.com", "widgets", 20, sizes=(900, 1000, 1500, 1600),
             crd=CrdFigures(["v1beta1", "v1"], "v1")),
        kind("Gadget", "example.com", "gadgets", 0, namespaces=None, crd=CrdFigures(["v1"], "v1")),
    ])


def rendered(entry: dict, namespace_of: list[str]) -> list[dict]:
    template = ObjectTemplate.from_dict(entry)
    return [template.render(name=f"prefill-replay-run-0-{k}", namespace=namespace_of[k], index=k, run="replay-run")
            for k in range(template.replicas)]


@pytest.mark.parametrize("scale", [1, 2, 0.5])
def test_the_step_and_the_shapes_are_the_captured_ones_times_k(scale: float) -> None:
    plan = plan_of(profile(), scale, source="prod.yaml")
    [step] = plan.steps
    assert step.nodes == max(1, round(4 * scale)) and step.duration_s == 60
    assert step.pods_per_node == round(40 * scale / step.nodes)  # the fleet's pods: about the captured pods × k
    counts = {s.capacity["cpu"]: s.count for s in plan.fleet.shapes}
    assert sum(counts.values()) == step.nodes
    assert counts == ({"4": 3, "8": 1} if scale == 1 else {"4": 6, "8": 2} if scale == 2 else {"4": 2})
    if scale >= 1:
        tainted = next(s for s in plan.fleet.shapes if s.capacity["cpu"] == "8")
        assert tainted.taints == (("private-0123456789ab", "NoSchedule"),) and tainted.labels == 11
    assert plan.load["objects"]["rate"] == 0 and user_plan({"objects": plan.load["objects"]}, step.nodes).total == 0


@pytest.mark.parametrize("scale", [1, 2])
def test_objects_are_the_generic_kinds_times_k_without_what_controllers_make(scale: int) -> None:
    plan = plan_of(profile(), scale, source="prod.yaml")
    prefill = {e["kind"]: e for e in plan.load["objects"]["prefill"]}
    # ConfigMaps less the kube-root-ca.crt of each of the 5 namespaces; Deployments have no generic body
    assert {k: e["replicas"] for k, e in prefill.items()} == {"ConfigMap": 60 * scale, "Secret": 10 * scale,
                                                              "Widget": 20 * scale}
    for entry in prefill.values():
        assert sum(entry["per_namespace"]) == entry["replicas"] and len(entry["per_namespace"]) == 3 * scale
        assert entry["top_up"]  # the replaying cluster's own objects of the kind count toward its total
    left = {(r.kind, r.reason.split(":")[0].split(" ")[0]): r.count for r in plan.replay.not_replayed}
    assert left[("Pod", "the")] == 40 and left[("ReplicaSet", "owned")] == 6 and left[("Event", "made")] == 300
    assert left[("ConfigMap", "one")] == 5  and ("Secret", "one") not in left and left[("Deployment", "no")] == 6
    assert ("Node", "the") in left and ("Namespace", "the") in left
    assert plan.replay.scale == scale and plan.replay.traffic == "not replayed"
    assert plan.to_dict()["replay"]["not_replayed"][0]["count"] > 0  # the results keep it with the plan


def test_crds_are_installed_permissive_from_the_captured_definitions() -> None:
    plan = plan_of(profile(), 1, source="prod.yaml")
    crds = [ObjectTemplate.from_dict(e).render(name="x", namespace="", index=0, run="r", keep_name=True)
            for e in plan.load["objects"]["install"]]
    assert [c["metadata"]["name"] for c in crds] == ["widgets.example.com", "gadgets.example.com"]
    widget = crds[0]["spec"]
    assert widget["scope"] == "Namespaced" and widget["names"]["kind"] == "Widget"
    assert [(v["name"], v["served"], v["storage"]) for v in widget["versions"]] == [("v1beta1", True, False),
                                                                                   ("v1", True, True)]
    assert all(v["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] for v in widget["versions"])
    assert crds[1]["spec"]["scope"] == "Cluster"


def served(objects: list[dict], custom: bool = False) -> Distribution:
    """The objects' sizes as the apiserver would serve them and a capture sizes the objects a replay makes: their
    JSON and what the apiserver adds, estimated, without the harness's labels."""
    return Distribution.of([len(json.dumps(o, separators=(",", ":"))) + served_extra(o, custom)
                            for o in map(without_harness_labels, objects)], "")


@pytest.mark.parametrize(("name", "count"), [("ConfigMap", 60), ("Widget", 40), ("Secret", 10)])
def test_sizes_follow_the_captured_quantiles(name: str, count: int) -> None:
    plan = plan_of(profile(), 2 if name == "Widget" else 1, source="prod.yaml")
    entry = next(e for e in plan.load["objects"]["prefill"] if e["kind"] == name)
    assert entry["replicas"] == count
    homes = [f"loadtest-objects-{n}" for n, c in enumerate(entry["per_namespace"]) for _ in range(c)]
    sizes = served(rendered(entry, homes), name == "Widget")
    captured = next(k for k in profile().kinds if k.kind == name).size_bytes
    # fewer than 100 objects: their p99 is their largest, at the captured p99 (the max gives way to it)
    for got, wanted in ((sizes.p50, captured.p50), (sizes.p99, captured.p99), (sizes.max, captured.p99)):
        assert abs(got - wanted) <= 4, (name, got, wanted)  # base64 pads come in fours


@pytest.mark.parametrize("name", ["ConfigMap", "Secret", "ServiceAccount", "Role", "Widget"])
def test_objects_as_small_as_the_captured_ones_carry_no_padding_nor_its_field(name: str) -> None:
    """The captured objects a replay makes are tiny (a user's one-key ConfigMaps): its objects are padded to none,
    the field that would hold the padding left out, so they are as small as the replay can make them; bigger
    ones are padded to their size, the field's own bytes counted."""
    found = profile()
    group = {"Role": "rbac.authorization.k8s.io", "Widget": "example.com"}.get(name, "")
    resource = name.lower() + "s"
    tiny = kind(name, group, resource, 40, sizes=(100, 100, 3000, 3000),
                made_size_bytes=Quantiles(40, 100, 100, 3000, 3000),
                crd=CrdFigures(["v1"], "v1") if name == "Widget" else None)
    found.kinds = [k for k in found.kinds if k.kind not in ("ConfigMap", "Secret", "Widget")] + [tiny]
    entry = next(e for e in plan_of(found, 1, source="prod.yaml").load["objects"]["prefill"] if e["kind"] == name)
    homes = [f"loadtest-objects-{n}" for n, c in enumerate(entry["per_namespace"]) for _ in range(c)]
    made = rendered(entry, homes)
    bare = [o for o in made if "data" not in o and "spec" not in o and not o["metadata"].get("annotations")]
    assert len(bare) > len(made) // 2  # p50 and below: no padding, no field for it
    for obj in bare:  # each as small as the replay can make it: its fixed bytes and its name's and namespace's
        floor = entry["input_vars"]["fixed"] + len(obj["metadata"]["name"]) + len(obj["metadata"].get(
            "namespace", ""))
        assert served([obj], name == "Widget").p50 == floor
    assert abs(served(made, name == "Widget").max - 3000) <= 4  # the largest padded to the captured p99


def made_configmaps(sizes: Quantiles) -> list[dict[str, Any]]:
    """The ConfigMaps a replay makes of a profile whose made ConfigMaps were of `sizes`."""
    found = profile()
    configmaps = found.kind("ConfigMap")
    assert configmaps is not None
    configmaps.made_size_bytes = sizes
    entry = next(e for e in plan_of(found, 1, source="prod.yaml").load["objects"]["prefill"]
                 if e["kind"] == "ConfigMap")
    homes = [f"loadtest-objects-{n}" for n, c in enumerate(entry["per_namespace"]) for _ in range(c)]
    return rendered(entry, homes)


def test_small_objects_are_padded_to_their_size_without_the_harnesss_labels() -> None:
    """A small captured object (a ConfigMap of under 500 bytes): the replay's, its labels left out as a capture
    sizes it, is the captured size; the labels (some 270 bytes with their managedFields entry) come on top."""
    made = made_configmaps(Quantiles(60, 480, 500, 3000, 3000))
    assert abs(served(made).p50 - 480) <= 4
    labelled = Distribution.of([len(json.dumps(o, separators=(",", ":"))) + served_extra(o, False) for o in made], "")
    assert labelled.p50 - served(made).p50 > 200  # what the labels add, which the original's objects lack


def test_the_sizes_followed_are_those_of_the_objects_a_replay_makes() -> None:
    """The profile's made_size_bytes (the objects without an owner made by neither the control plane nor the
    harness), not every object's, which the control plane's own (kube-root-ca.crt, bigger) count in."""
    sizes = served(made_configmaps(Quantiles(60, 1500, 1600, 1700, 1700)))
    assert abs(sizes.p50 - 1500) <= 4 and abs(sizes.max - 1700) <= 4


def test_knots_hit_the_nearest_ranks_and_spread_keeps_the_total() -> None:
    assert size_knots(Quantiles(10, 100, 200, 300, 400), 10, 50) == [[1, 50], [5, 100], [9, 200], [10, 300]]
    found = spread(100, 7, Quantiles(7, 5, 20, 30, 30))
    assert sum(found) == 100 and len(found) == 7 and found == sorted(found)


@pytest.mark.parametrize("scale", [0, -1, math.inf, math.nan, "two"])
def test_a_scale_that_is_not_positive_and_finite_is_refused_in_one_line(scale) -> None:
    with pytest.raises(LoadTestError, match="^--scale: the scale must be a positive finite number") as refused:
        plan_of(profile(), scale, source="prod.yaml")
    assert "\n" not in str(refused.value)


def test_a_plan_names_a_profile_relative_to_itself(tmp_path: Path) -> None:
    profile().write(tmp_path / "prod.yaml")
    (tmp_path / "replay.yaml").write_text(yaml.safe_dump({
        "workload": {"profile": "prod.yaml", "scale": 2, "duration_s": 7},
        "slo": {"min_samples": 5}, "load": {"scenarios": {"list_pollers": {"rate": 1}}}}))
    plan = load_plan(tmp_path / "replay.yaml")
    assert plan.name == "replay" and plan.steps[0].nodes == 8 and plan.steps[0].duration_s == 7
    assert set(plan.load) == {"objects", "list_pollers"} and plan.slo["min_samples"] == 5
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"workload": {"profile": "prod.yaml"}, "steps": []}))
    with pytest.raises(PlanError, match="steps: set by the workload's profile"):
        load_plan(tmp_path / "bad.yaml")
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({"workload": {"profile": "replay.yaml"}}))
    with pytest.raises(LoadTestError, match="a profile of no schema line"):
        load_plan(tmp_path / "other.yaml")
    assert Counter(load_plan(tmp_path / "replay.yaml").to_dict()) == Counter(plan.to_dict())
    # a profile elsewhere, named by its absolute path: the replay's fidelity finds it there
    (tmp_path / "profiles").mkdir()
    profile().write(tmp_path / "profiles" / "prod.yaml")
    (tmp_path / "away.yaml").write_text(yaml.safe_dump({"workload": {"profile": str(tmp_path / "profiles" /
                                                                                  "prod.yaml")}}))
    assert fidelity.profile_path(load_plan(tmp_path / "away.yaml")) == tmp_path / "profiles" / "prod.yaml"


def test_top_up_is_true_or_false() -> None:
    data = plan_data(profile(), 1, source="prod.yaml")
    data["load"]["scenarios"]["objects"]["prefill"][0]["top_up"] = "yes"
    with pytest.raises(PlanError, match=r"prefill\[0\]\.top_up: must be true or false") as refused:
        plan_mod.parse(data, "prod.yaml")
    assert "\n" not in str(refused.value)


def test_a_rehearsal_replays_a_profile_as_a_run_does(tmp_path: Path) -> None:
    """`loadtest rehearse --profile P --scale K` rehearses the upgrade on the captured cluster's replay."""
    from loadtests.cli.main import build_parser
    from loadtests.cli.run import run_plan_of

    profile().write(tmp_path / "prod.yaml")
    args = build_parser().parse_args(["rehearse", "--from", "v1.36.3", "--to", "v1.37.2", "--profile",
                                      str(tmp_path / "prod.yaml"), "--scale", "2", "--duration", "9"])
    plan = run_plan_of(args)
    assert plan.replay is not None and plan.replay.scale == 2 and plan.steps[0].duration_s == 9
    assert plan.to_dict() == plan_of(profile(), 2, source=str(tmp_path / "prod.yaml"), duration_s=9).to_dict()
    both = build_parser().parse_args(["rehearse", "--from", "v1.36.3", "--to", "v1.37.2", "--plan", "smoke",
                                      "--profile", str(tmp_path / "prod.yaml")])
    with pytest.raises(LoadTestError, match="--profile and --plan name two plans"):
        run_plan_of(both)


@pytest.mark.parametrize("scale", [1, 2])
def test_the_control_planes_bootstrap_objects_are_made_once_by_the_replaying_clusters_own(scale: int) -> None:
    """Of 75 ClusterRoles 73 are the control plane's (the replaying cluster has its own, counted by the top-up):
    the entry's total is 73 + 2 × k; FlowSchemas, all the control plane's, need nothing made; an older capture's
    kind (control_plane None) is made whole × k."""
    found = Profile(capture=figures(), kinds=[
        kind("ClusterRole", "rbac.authorization.k8s.io", "clusterroles", 75, namespaces=None, control_plane=73),
        kind("Role", "rbac.authorization.k8s.io", "roles", 7, control_plane=7),
        kind("Secret", "", "secrets", 10, control_plane=None)])
    plan = plan_of(found, scale, source="prod.yaml")
    prefill = {e["kind"]: e for e in plan.load["objects"]["prefill"]}
    assert {k: e["replicas"] for k, e in prefill.items()} == {"ClusterRole": 73 + 2 * scale, "Secret": 10 * scale}
    assert all(e["top_up"] for e in prefill.values())
    left = {(r.kind, r.reason.split(",")[0]): r.count for r in plan.replay.not_replayed}
    assert left == {("ClusterRole", "made by the control plane at bootstrap"): 73,
                    ("Role", "made by the control plane at bootstrap"): 7}
    # a namespaced kind: the cluster's own share goes to the last namespace, the one a top-up leaves short
    data = plan_data(Profile(capture=figures(), kinds=[kind("Role", "rbac.authorization.k8s.io", "roles", 9,
                                                            control_plane=7)]), scale, source="prod.yaml")
    [entry] = data["load"]["scenarios"]["objects"]["prefill"]
    assert entry["replicas"] == 7 + 2 * scale and sum(entry["per_namespace"]) == entry["replicas"]
    assert entry["per_namespace"][-1] >= 7


@pytest.mark.parametrize("scale", [1, 2])
def test_the_replay_makes_the_users_namespaces_times_k_and_asks_none_of_their_defaults(scale: int) -> None:
    """A cluster of 4 system namespaces, 2 of its users' and 1 of the harness's: the replay makes 2 × k namespaces
    (the replaying cluster has its own system ones, its harness its own), spreads the objects over no more, and
    asks for no kube-root-ca.crt or default ServiceAccount (its control plane makes one with each namespace), nor
    for the harness's objects of the original."""
    found = Profile(capture=figures(), kinds=[
        kind("Namespace", "", "namespaces", 7, namespaces=None, control_plane=4, harness=1),
        # 4 system namespaces' roots, 2 users' namespaces', the harness's, 2 more of kube-system, 30 of the users
        kind("ConfigMap", "", "configmaps", 39, namespaces=7, control_plane=4, namespace_defaults=2, harness=1),
        kind("ServiceAccount", "", "serviceaccounts", 7, namespaces=7, control_plane=4, namespace_defaults=2,
             harness=1),
        kind("ClusterRoleBinding", "rbac.authorization.k8s.io", "clusterrolebindings", 60, namespaces=None,
             control_plane=59, harness=1)])
    data = plan_data(found, scale, source="prod.yaml")
    objects = data["load"]["scenarios"]["objects"]
    assert objects["namespaces"] == 2 * scale
    [entry] = objects["prefill"]  # no ServiceAccount to make: all the control plane's or the harness's
    assert "configmaps" in entry["template"] and entry["replicas"] == 32 * scale + 4  # + the system roots, once
    assert len(entry["per_namespace"]) <= 2 * scale and sum(entry["per_namespace"]) == entry["replicas"]
    left = {(r["kind"], r["reason"].split(" ")[0]): r["count"] for r in data["replay"]["not_replayed"]}
    assert left[("ConfigMap", "one")] == 2 and left[("ConfigMap", "made")] == 4 and left[("ConfigMap", "the")] == 1
    assert left[("ServiceAccount", "one")] == 2 and left[("ClusterRoleBinding", "the")] == 1
    plan = plan_mod.parse(data, "prod.yaml")
    assert plan.load["objects"]["namespaces"] == 2 * scale
