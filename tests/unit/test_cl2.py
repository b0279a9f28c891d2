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


def test_phases_are_steps_and_a_change_needs_a_mix_before_it(tmp_path) -> None:
    import pytest

    from loadtests.config import plan as plan_mod
    from loadtests.errors import PlanError

    plan = plan_mod.load("cl2-smoke")
    assert [s.phase for s in plan.steps] == ["cl2-create", "cl2-scale", "cl2-delete", "scheduler-throughput",
                                             "pod-startup"]
    assert plan.cl2.pods_per_node == 10 and plan.to_dict()["cl2"]["throughput"] == 10
    assert "cl2" not in plan_mod.load("smoke").to_dict()  # a plan without phases reads as before
    assert "phase" not in plan_mod.load("smoke").to_dict()["steps"][0]
    with pytest.raises(PlanError, match=r"steps\[0\].phase: cl2-scale needs a cl2-create step of 20 nodes"):
        plan_mod.parse({"steps": [{"nodes": 20, "phase": "cl2-scale"}]})
    with pytest.raises(PlanError, match=r"steps\[2\].phase: cl2-delete needs a cl2-create step"):
        plan_mod.parse({"steps": [{"nodes": 20, "phase": "cl2-create"}, {"nodes": 20, "phase": "cl2-delete"},
                                  {"nodes": 20, "phase": "cl2-delete"}]})
    one_of = r"steps\[0\].phase: must be one of: cl2-create, cl2-scale, cl2-delete, scheduler-throughput"
    with pytest.raises(PlanError, match=one_of):
        plan_mod.parse({"steps": [{"nodes": 20, "phase": "soak"}]})
    with pytest.raises(PlanError, match=r"cl2.throughput: must be a number >= 0.1"):
        plan_mod.parse({"steps": [{"nodes": 20}], "cl2": {"throughput": 0}})


def test_steps_of_one_node_count_are_drawn_per_step() -> None:
    from loadtests.analysis.figures import CHARTS, Series
    from loadtests.report.charts import Line, figure

    series = Series("server_mutating", "POST deployments", [0.1, 0.2, 0.15])
    names = ["20 nodes · cl2-create", "20 nodes · cl2-scale", "20 nodes · cl2-delete"]
    drawn = figure(CHARTS["server_mutating"], [Line(series, "POST deployments", "#000000", [20, 20, 20], names)])
    assert drawn["layout"]["xaxis"]["type"] == "category" and drawn["data"][0]["x"] == names
    growing = figure(CHARTS["server_mutating"], [Line(series, "POST", "#000000", [10, 20, 40], names)])
    assert growing["data"][0]["x"] == [10, 20, 40] and growing["layout"]["xaxis"]["ticktext"][0] == "10 nodes"


def test_each_object_of_the_mix_is_made_as_clusterloader2_makes_it() -> None:
    from loadtests.config.cl2 import Group
    from loadtests.kube.access import ClusterAccess
    from loadtests.kube.rest import RestClient
    from loadtests.run.cl2 import Cl2Load, Cl2Object

    client = RestClient(ClusterAccess(server="https://127.0.0.1:1", kubeconfig="/nonexistent"))
    load = Cl2Load(client, {"pods_per_node": 10, "nodes_per_namespace": 100, "throughput": 10}, "r1")
    small = Group("Deployment", "small-deployment", 18, 5)
    deployment = load._manifest(Cl2Object(small, "ns", "small-deployment-3", 5))
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 5
    assert {v["name"]: v.get("configMap", v.get("secret")) for v in pod["spec"]["volumes"]} == {
        "configmap": {"name": "small-deployment-3"}, "secret": {"secretName": "small-deployment-3"}}
    assert pod["metadata"]["labels"]["k8s-loadtest/run"] == "r1"  # its pods are the run's, found by label
    service = load._manifest(Cl2Object(Group("Service", "small-service", 9), "ns", "small-service-3", 0))
    assert service["spec"]["selector"] == {"app": "small-deployment-3"}
    job = load._manifest(Cl2Object(Group("Job", "medium-job", 1, 30, 90), "ns", "medium-job-0", 30))
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (30, 90)
    daemonset = load._manifest(Cl2Object(Group("DaemonSet", "daemonset", 1), "ns", "daemonset-0", 0))
    assert daemonset["spec"]["template"]["spec"]["priorityClassName"] == load.priority_class
    client.close()


def test_the_documented_table_is_what_the_formulas_give() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "plans.md").read_text()
    mix = load_mix(5000)
    count = {g.basename: g.per_namespace for g in mix.groups if g.kind not in ("ConfigMap", "Secret")}
    rows = [
        f"| big Deployments | {count['big-deployment']} | 250 |",
        f"| medium Deployments | {count['medium-deployment']} | 30 |",
        f"| small Deployments | {count['small-deployment']} | 5 |",
        f"| Services (for big, medium, small Deployments) | {count['big-service']}, {count['medium-service']}, "
        f"{count['small-service']} | — |",
        f"| ConfigMaps, Secrets | {mix.per_namespace('ConfigMap')}, {mix.per_namespace('Secret')} | — |",
    ]
    for row in rows:
        assert row in text, row


def test_scheduling_throughput_per_interval_and_a_burst_shorter_than_one() -> None:
    from loadtests.run.cl2 import scheduling_throughput

    # 500 pods bound over 2.5 s: one interval, ending at the last binding: 200 pods/s, not 500 / 5 = 100
    burst = scheduling_throughput([100.0 + 2.5 * (i + 1) / 500 for i in range(500)], 100.0, 500, 100.0, True)
    assert burst.samples == [200.0] and burst.max == 200.0 and burst.passed is True and burst.seconds == 2.5
    # 1,000 pods at 50 pods/s for 20 s: four full intervals, every one under the threshold
    slow = scheduling_throughput([i / 50 + 0.02 for i in range(1000)], 0.0, 1000, 100.0, True)
    assert slow.samples == [50.0, 50.0, 50.0, 50.0] and slow.passed is False
    # not every pod bound: the best interval judges nothing
    short = scheduling_throughput([1.0, 2.0], 0.0, 10, 100.0, False)
    assert short.passed is None and short.seconds is None and short.samples == [1.0]
    assert scheduling_throughput([], 0.0, 10, 100.0, False).samples == []


def test_the_bundled_cl2_load_plan_has_clusterloader2s_defaults() -> None:
    from loadtests.config import cl2
    from loadtests.config import plan as plan_mod

    plan = plan_mod.load("cl2-load")
    assert (plan.cl2.pods_per_node, plan.cl2.nodes_per_namespace, plan.cl2.throughput) == (30, 100, 10)
    assert plan.cl2.scheduler_pods == 0 and plan.cl2.latency_pods == cl2.LATENCY_PODS  # max(1000, nodes), 500
    assert plan.cl2.scheduler_threshold == cl2.SCHEDULER_THRESHOLD
    assert [(s.nodes, s.phase) for s in plan.steps] == [(n, p) for n in (100, 200) for p in cl2.PHASES]
    # every phase has time for its pods at the plan's pace: 3,000 pods at 10/s at 100 nodes
    pods_s = cl2.load_mix(100, 30).controlled_pods() / plan.cl2.throughput
    assert all(s.duration_s > pods_s for s in plan.steps[:3])


def test_the_readme_s_side_by_side_column_is_what_the_code_makes() -> None:
    from pathlib import Path

    from loadtests.config import cl2
    from loadtests.config import plan as plan_mod

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    mix = load_mix(100)
    n = {g.basename: g.per_namespace for g in mix.groups}
    params = plan_mod.load("cl2-load").cl2
    ours = {
        "big Deployments, 250 pods": f"{n['big-deployment']}",
        "medium Deployments, 30 pods": f"{n['medium-deployment']}",
        "small Deployments, 5 pods": f"{n['small-deployment']}",
        "StatefulSets (small, medium)": f"{n['small-statefulset']}, {n['medium-statefulset']}",
        "Jobs (small, medium, big)": f"{n['small-job']}, {n['medium-job']}, {n['big-job']}",
        "Services (big, medium, small)": f"{n['big-service']}, {n['medium-service']}, {n['small-service']}",
        "ConfigMaps, Secrets": f"{mix.per_namespace('ConfigMap')}, {mix.per_namespace('Secret')}",
        "DaemonSets": f"{n['daemonset']}",
        "scheduler-throughput pods": f"{max(cl2.MIN_SCHEDULER_PODS, 100):,}" if params.scheduler_pods == 0 else "",
        "latency pods": f"{params.latency_pods}",
    }
    rows = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in text.splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    for row, count in ours.items():
        assert rows.get(row) == count, (row, rows.get(row), count)
