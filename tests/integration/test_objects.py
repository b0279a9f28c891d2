"""Objects of any kind from templates, against a real control plane: every bundled kind created, updated,
scaled and deleted, a custom resource through the CRD the plan installs, a template the apiserver refuses
stopped in one line before anything runs, and nothing of it left afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.config import plan as plan_mod
from loadtests.controlplane.base import TargetInfo
from loadtests.errors import PlanError
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.load.generator import StepLoad
from loadtests.measure.controlled import ControlledPodsProbe
from loadtests.run.fleet import Fleet
from loadtests.run.objects import ObjectsSetup
from tests.checks import run_load

NODES = 4
EVERY_KIND = ["configmap.yaml", "secret.yaml", "deployment.yaml", "service.yaml", "statefulset.yaml", "job.yaml",
              "daemonset.yaml", "widget.yaml"]
SCALABLE = {"Deployment", "StatefulSet", "Widget"}


def _plan(tmp_path: Path, objects_params: dict, name: str = "objects-test") -> plan_mod.Plan:
    return plan_mod.parse({"name": name, "steps": [{"nodes": NODES}],
                           "load": {"scenarios": {"objects": objects_params}}}, source=str(tmp_path / "plan.yaml"))


def _ours_left(rest: RestClient, run: str) -> list[str]:
    """Namespaces of the objects scenario, the installed CRD and PriorityClass: what must be gone."""
    found = [n["metadata"]["name"] for n in rest.list_items("namespaces", label_selector=objects.MANAGED_BY_SELECTOR)
             if n["metadata"]["name"].startswith(objects.NS_OBJECTS_PREFIX)]
    for path in ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.loadtest.example.com",
                 f"/apis/scheduling.k8s.io/v1/priorityclasses/loadtest-{run}"):
        if rest.request("GET", path, ok=(404,)):
            found.append(path)
    return found


def test_every_kind_is_created_updated_scaled_and_deleted(control_plane: TargetInfo, rest: RestClient,
                                                           tmp_path: Path) -> None:
    fleet = Fleet(rest)
    fleet.ensure_namespaces()
    fleet.scale_nodes(NODES, timeout_s=120)
    run = "it-objects"
    plan = _plan(tmp_path, {
        "rate": 10.0, "users": 2, "lifetime_s": 6.0, "update_every_s": 2.0, "scale_every_s": 2.5,
        "nodes_per_namespace": 2,
        "install": [{"template": "widget-crd.yaml"},
                    {"template": "priorityclass.yaml", "input_vars": {"class_name": f"loadtest-{run}"}}],
        "templates": [{"template": t, **({"input_vars": {"priority_class": f"loadtest-{run}"}}
                                          if t == "daemonset.yaml" else {})} for t in EVERY_KIND],
    })
    made = ObjectsSetup(rest, plan.load, run, plan.source)
    try:
        made.prepare(NODES)
        assert made.namespaces == ["loadtest-objects-0", "loadtest-objects-1"]  # one per 2 nodes
        assert {k.kind: k.scalable for k in made.kinds}["Widget"]  # the CRD's /scale subresource, discovered
        assert made.controlled() == ["DaemonSet", "Deployment", "Job", "StatefulSet"]
        controlled = ControlledPodsProbe(control_plane.access, made.controlled(), made.selector)
        controlled.start()
        try:
            outcome = run_load(StepLoad(made.scenarios(plan.load), nodes=NODES, duration_s=12, out_dir=tmp_path,
                                        run_id=run), control_plane.access)
        finally:
            timed = controlled.gather()
        # every pod-controlling kind had generations timed from asked to all pods running (a Job: complete)
        for kind in ("DaemonSet", "Deployment", "Job", "StatefulSet"):
            running = timed[kind].running
            assert running.count > 0 and 0 < running.p50 <= running.max < 12, (kind, timed[kind])
        rows = {c.name: c for c in outcome.client}
        failed = {c.name: c.failures for c in outcome.client if c.failures}
        assert not failed, (failed, outcome.failures[:5])
        kinds = {"ConfigMap", "Secret", "Deployment", "Service", "StatefulSet", "Job", "DaemonSet", "Widget"}
        for kind in kinds:
            for verb in ("POST", "PATCH", "DELETE"):
                assert rows[f"{verb} {kind} (objects)"].count > 0, (kind, verb, sorted(rows))
        for kind in SCALABLE:
            assert rows[f"PATCH {kind}/scale (objects)"].count > 0, kind
        assert not [k for k in kinds - SCALABLE if f"PATCH {k}/scale (objects)" in rows]  # no /scale: never scaled
        rate = next(r for r in outcome.rates if r.scenario == "objects")
        assert rate.asked_per_s == 10.0 and rate.achieved_per_s >= 0.7 * 10.0, outcome.rates
        # each user deleted what it made: the namespaces are empty of the harness's objects
        left = rest.list_items("configmaps", "loadtest-objects-0", label_selector=f"k8s-loadtest/run={run}")
        assert left == []
    finally:
        problems = made.remove()
    assert problems == []
    assert _ours_left(rest, run) == []


@pytest.mark.parametrize(("template", "says"), [
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: many}\n",
     "the apiserver refused it: "),
    ("apiVersion: loadtest.example.com/v9\nkind: Gadget\nmetadata: {name: x}\n",
     "no API group/version 'loadtest.example.com/v9'"),
    ("apiVersion: v1\nkind: Gizmo\nmetadata: {name: x}\n", "v1 has no kind 'Gizmo'"),
])
def test_a_template_the_apiserver_refuses_stops_before_anything_is_made(
        control_plane: TargetInfo, rest: RestClient, tmp_path: Path, template: str, says: str) -> None:
    (tmp_path / "bad.yaml").write_text(template)
    plan = _plan(tmp_path, {"templates": [{"template": "configmap.yaml"}, {"template": "bad.yaml"}]})
    made = ObjectsSetup(rest, plan.load, "it-refused", plan.source)
    try:
        with pytest.raises(PlanError) as refused:
            made.prepare(2)
        line = str(refused.value)
        assert "\n" not in line and "load.scenarios.objects.templates[1] (bad.yaml)" in line and says in line, line
        assert rest.list_items("configmaps", "loadtest-objects-0", label_selector="k8s-loadtest/run=it-refused") == []
    finally:
        assert made.remove() == []
    assert _ours_left(rest, "it-refused") == []
