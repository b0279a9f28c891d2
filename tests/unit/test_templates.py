"""Object templates as the plan reads them: every bundled one renders, and a bad one is one line naming the
plan's entry and the template, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.config import plan as plan_mod
from loadtests.config import templates
from loadtests.config.scenarios import demands, objects_namespaces, objects_request
from loadtests.errors import PlanError


def _plan(tmp_path: Path, objects_params: dict) -> plan_mod.Plan:
    return plan_mod.parse({"steps": [{"nodes": 10}], "load": {"scenarios": {"objects": objects_params}}},
                          source=str(tmp_path / "p.yaml"))


@pytest.mark.parametrize("name", templates.bundled())
def test_every_bundled_template_renders_to_one_labelled_object(name: str) -> None:
    template = templates.read("plan", "templates[0]", {"template": name})
    obj = template.render(name="obj-1", namespace="ns-a", index=1, run="r1")
    assert obj["apiVersion"] == template.api_version and obj["kind"] == template.kind
    assert obj["metadata"]["labels"]["k8s-loadtest/run"] == "r1"
    assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-loadtest"
    assert obj["metadata"]["name"] == "obj-1" and obj["metadata"]["namespace"] == "ns-a"
    kept = template.render(name="obj-1", namespace="", index=1, run="r1", keep_name=True)
    assert "namespace" not in kept["metadata"]
    if name == "widget-crd.yaml":
        assert kept["metadata"]["name"] == "widgets.loadtest.example.com"  # a CRD's name is fixed


def test_templates_beside_the_plan_with_input_vars(tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\ndata: {v: '{{ value }}-{{ index }}'}\n")
    plan = _plan(tmp_path, {"templates": [{"template": "cm.yaml", "replicas": 3, "input_vars": {"value": "x"}}]})
    entry = plan.load["objects"]["templates"][0]
    assert entry["replicas"] == 3 and entry["kind"] == "ConfigMap" and "{{ value }}" in entry["text"]
    obj = templates.ObjectTemplate.from_dict(entry).render(name="a", namespace="n", index=7, run="r")
    assert obj["data"] == {"v": "x-7"}
    demand = demands(plan.load, 10)["objects"]
    assert demand.counted_by == ("POST", objects_request("POST", "ConfigMap")) and demand.asked == 5.0


@pytest.mark.parametrize(("text", "says"), [
    ("apiVersion: v1\nkind: ConfigMap\ndata: {a: '{{ missing }}'}\n", "not a valid template: 'missing' is undefined"),
    ("apiVersion: v1\nkind: ConfigMap\ndata: {a: '{{ name }'}\n", "not a valid template"),
    ("apiVersion: v1\nkind: ConfigMap\ndata: [a: b\n", "does not render to YAML"),
    ("apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: Secret\n", "must render to one YAML mapping"),
    ("- a\n- b\n", "must render to one YAML mapping"),
    ("apiVersion: v1\nmetadata: {}\n", "the object has no kind"),
    ("kind: ConfigMap\n", "the object has no apiVersion"),
])
def test_a_bad_template_is_one_line_naming_it(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(PlanError) as refused:
        _plan(tmp_path, {"templates": ["configmap.yaml", {"template": "bad.yaml"}]})
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{tmp_path / 'p.yaml'}: load.scenarios.objects.templates[1] "
                                                "(bad.yaml)") and says in line, line


@pytest.mark.parametrize(("params", "says"), [
    ({"templates": []}, "templates: must list at least one template, here or in `prefill` (bundled: configmap.yaml"),
    ({"templates": [{"template": "nowhere.yaml"}]}, "templates[0].template: cannot read nowhere.yaml"),
    ({"templates": [{"template": "configmap.yaml", "replicas": 0}]}, "templates[0].replicas: must be an integer"),
    ({"templates": [{"template": "configmap.yaml", "count": 2}]}, "templates[0].count: unknown field"),
    ({"templates": ["configmap.yaml"], "install": [{"template": "widget-crd.yaml", "replicas": 2}]},
     "install[0].replicas: unknown field"),
    ({"templates": "configmap.yaml"}, "templates: must be a list of templates"),
    ({"templates": ["configmap.yaml"], "rate": -1}, "rate: must be a number >= 0"),
])
def test_bad_entries_are_refused_with_their_path(tmp_path: Path, params: dict, says: str) -> None:
    with pytest.raises(PlanError, match=None) as refused:
        _plan(tmp_path, params)
    assert says in str(refused.value), str(refused.value)


def test_one_namespace_per_nodes_per_namespace() -> None:
    assert objects_namespaces(1, 100) == ["loadtest-objects-0"]
    assert objects_namespaces(100, 100) == ["loadtest-objects-0"]
    assert objects_namespaces(101, 100) == ["loadtest-objects-0", "loadtest-objects-1"]
    assert len(objects_namespaces(5000, 100)) == 50


def test_the_bundled_custom_resources_plan_reads() -> None:
    plan = plan_mod.load("custom-resources")
    assert [t["kind"] for t in plan.load["objects"]["templates"]] == ["Widget", "ConfigMap"]
    assert [t["kind"] for t in plan.load["objects"]["install"]] == ["CustomResourceDefinition"]
