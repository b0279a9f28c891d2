"""ClusterLoader2's load-test object mix, by its own formulas (clusterloader2/testing/load/config.yaml)."""

from __future__ import annotations

from loadtests.config.cl2 import load_mix


def test_a_hundred_node_namespace_holds_what_clusterloader2_makes() -> None:
    # per namespace of 100 nodes x 30 pods: 3,000 pods; big 3000/1000 = 3 - 1 (Jobs) = 2; medium 3000/120 = 25
    # - 1 (StatefulSet) - 1 (Jobs) = 23; small 3000/10 = 300 - 1 - 1 = 298; Services (n + 1) / 2 of each
    mix = load_mix(5000)
    assert mix.namespaces == 50 and mix.pods_per_namespace == 3000 and mix.total_pods == 150_000
    sizes = {g.basename: (g.per_namespace, g.size) for g in mix.groups if g.kind == "Deployment"}
    assert sizes == {"big-deployment": (2, 250), "medium-deployment": (23, 30), "small-deployment": (298, 5)}
    assert {g.basename: g.per_namespace for g in mix.groups if g.kind == "Service"} == {
        "big-service": 1, "medium-service": 12, "small-service": 149}
    assert mix.per_namespace("ConfigMap") == mix.per_namespace("Secret") == 2 + 23 + 298
    assert {g.basename: (g.size, g.completions) for g in mix.groups if g.kind == "Job"} == {
        "small-job": (5, 15), "medium-job": (30, 90), "big-job": (250, 750)}
    assert mix.per_namespace("StatefulSet") == 2 and mix.per_namespace("DaemonSet") == 1
    # the controlled pods come to the namespace's pods, less what the Jobs' sizes leave over
    assert mix.controlled_pods() == 50 * (2 * 250 + 23 * 30 + 298 * 5 + 5 + 30 + 5 + 30 + 250)


def test_a_small_cluster_is_one_namespace_of_all_its_nodes_without_big_jobs() -> None:
    mix = load_mix(20, pods_per_node=10)
    assert mix.namespaces == 1 and mix.nodes_per_namespace == 20 and mix.pods_per_namespace == 200
    kinds = {g.basename: g.per_namespace for g in mix.groups}
    assert "big-job" not in kinds and "big-deployment" not in kinds  # 200 // 1000 = 0
    assert kinds["small-deployment"] == 200 // 10 - 2  # less one for the StatefulSet, one for the Jobs
    assert "medium-deployment" not in kinds  # 200 // 120 = 1, less the same two: none
    assert kinds["small-statefulset"] == kinds["medium-statefulset"] == kinds["daemonset"] == 1
