"""A plan's `fleet.shapes` give the fake nodes captured shapes, in their proportions, and are refused in one line
when malformed; a plan without them is written as before (same digest)."""

from __future__ import annotations

from collections import Counter

import pytest

from loadtests.config import plan as plan_mod
from loadtests.errors import PlanError
from loadtests.kube import objects
from loadtests.results import plan_digest
from loadtests.run.fleet import Fleet

GOOD = {"name": "t", "steps": [{"nodes": 10, "duration_s": 5}]}
SHAPES = {"shapes": [
    {"count": 3, "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
     "allocatable": {"cpu": "3500m", "memory": "15Gi", "pods": "110"}, "labels": 12},
    {"count": 1, "capacity": {"cpu": "8"}, "taints": [{"key": "private-0123456789ab", "effect": "NoSchedule"},
                                                      {"key": "node-role.kubernetes.io/infra", "effect": "NoExecute"}]},
]}


def test_nodes_take_the_shapes_in_their_proportions() -> None:
    plan = plan_mod.parse({**GOOD, "fleet": SHAPES}, "t.yaml")
    fleet = Fleet(client=None, shapes=plan.fleet)  # type: ignore[arg-type]  # no request is made
    nodes = [fleet.node(objects.node_name(i), i) for i in range(8)]
    cpus = Counter(n["status"]["capacity"]["cpu"] for n in nodes)
    assert cpus == {"4": 6, "8": 2}
    small = next(n for n in nodes if n["status"]["capacity"]["cpu"] == "4")
    assert small["status"]["allocatable"] == {"cpu": "3500m", "memory": "15Gi", "pods": "110"}
    assert len(small["metadata"]["labels"]) == 12
    tainted = next(n for n in nodes if n["status"]["capacity"]["cpu"] == "8")
    assert [t["key"] for t in tainted["spec"]["taints"]] == ["kwok.x-k8s.io/node", "private-0123456789ab",
                                                             "node-role.kubernetes.io/infra"]
    assert tainted["status"]["capacity"]["memory"] == "256Gi"  # the template's, where the shape says nothing
    for node in nodes:  # kwok still manages them and the harness still finds them
        labels = node["metadata"]["labels"]
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert all(labels.get(k) == v for k, v in (p.split("=") for p in objects.NODE_SELECTOR.split(",")))


def test_a_taint_the_fake_nodes_have_already_is_not_added_twice() -> None:
    """A replay of this harness's own nodes captures the fake nodes' taint: the API refuses a node that has it
    twice (one key and effect), so the shape's copy is dropped, and a repeated one too."""
    node = objects.node_manifest("n", 0, taints=(("kwok.x-k8s.io/node", "NoSchedule"), ("a.example/x", "NoExecute"),
                                                 ("a.example/x", "NoExecute")))
    assert [(t["key"], t["effect"]) for t in node["spec"]["taints"]] == [("kwok.x-k8s.io/node", "NoSchedule"),
                                                                        ("a.example/x", "NoExecute")]


def test_the_fleets_pods_tolerate_every_shapes_taints() -> None:
    plan = plan_mod.parse({**GOOD, "fleet": SHAPES}, "t.yaml")
    pod = objects.deployment_manifest("fleet", objects.NS_FLEET, 3, plan.fleet.taints)["spec"]["template"]["spec"]
    assert {(t["key"], t["effect"]) for t in pod["tolerations"]} >= {("private-0123456789ab", "NoSchedule"),
                                                                     ("node-role.kubernetes.io/infra", "NoExecute")}


def test_a_plan_without_shapes_keeps_its_digest() -> None:
    plain = plan_mod.parse(GOOD, "t.yaml")
    assert "fleet" not in plain.to_dict() and "replay" not in plain.to_dict()
    shaped = plan_mod.parse({**GOOD, "fleet": SHAPES}, "t.yaml")
    assert plan_digest(shaped.to_dict()) != plan_digest(plain.to_dict())
    assert plan_mod.parse(shaped.to_dict(), "again.yaml").fleet == shaped.fleet


@pytest.mark.parametrize(("fleet", "said"), [
    ({"shapes": [{"capacity": {"cpu": "4"}}]}, "fleet.shapes[0]: must be a mapping with `count`"),
    ({"shapes": [{"count": 0}]}, "fleet.shapes[0].count: must be an integer >= 1"),
    ({"shapes": [{"count": 1, "capacity": {"cpu": "lots"}}]}, "fleet.shapes[0].capacity.cpu: not a quantity"),
    ({"shapes": [{"count": 1, "capacity": {"gpu": "1"}}]}, "fleet.shapes[0].capacity: must map cpu, memory, pods"),
    ({"shapes": [{"count": 1, "taints": [{"key": "a", "effect": "Sometimes"}]}]}, "taints[0].effect: must be one"),
    ({"shapes": [{"count": 1, "taints": [{"key": "a b", "effect": "NoSchedule"}]}]}, "taints[0].key: not a taint key"),
    ({"nodes": []}, "fleet: must be a mapping with `shapes` only"),
])
def test_a_malformed_shape_is_refused_in_one_line(fleet: dict, said: str) -> None:
    with pytest.raises(PlanError, match="^t.yaml: ") as refused:
        plan_mod.parse({**GOOD, "fleet": fleet}, "t.yaml")
    assert said in str(refused.value) and "\n" not in str(refused.value)
