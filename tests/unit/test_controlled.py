"""Controlled pods running from watch events: when a controller is done with a generation of its object, and
how each generation is timed from asked to done (deleted first and unfinished ones counted, never timed)."""

from __future__ import annotations

from typing import Any

from loadtests.kube.access import ClusterAccess
from loadtests.kube.watch import WatchEvent
from loadtests.measure.controlled import ControlledPodsProbe, done


def _deployment(generation: int, observed: int, replicas: int, ready: int, updated: int, current: int) -> dict:
    return {"metadata": {"name": "web", "namespace": "ns", "generation": generation},
            "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "readyReplicas": ready, "updatedReplicas": updated,
                       "replicas": current}}


def test_a_deployment_is_done_when_every_pod_of_its_generation_is_ready() -> None:
    assert done("Deployment", _deployment(2, 2, 3, 3, 3, 3))
    assert not done("Deployment", _deployment(2, 1, 3, 3, 3, 3))  # the controller has not seen generation 2
    assert not done("Deployment", _deployment(2, 2, 3, 2, 3, 3))  # a pod not ready yet
    assert not done("Deployment", _deployment(2, 2, 3, 3, 3, 5))  # old pods of the rolling update still there
    assert not done("Deployment", _deployment(2, 2, 3, 3, 1, 3))  # not all pods of the new template
    scaled_to_zero = {"metadata": {"generation": 3}, "spec": {"replicas": 0}, "status": {"observedGeneration": 3}}
    assert done("Deployment", scaled_to_zero)  # zero asked, zero there: absent counts are 0


def test_daemonsets_and_jobs() -> None:
    ds = {"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "desiredNumberScheduled": 4,
                                                   "numberReady": 4, "updatedNumberScheduled": 4,
                                                   "numberAvailable": 4}}
    assert done("DaemonSet", ds)
    ds["status"]["numberReady"] = 3
    assert not done("DaemonSet", ds)
    assert done("Job", {"spec": {"completions": 4}, "status": {"succeeded": 4}})
    assert not done("Job", {"spec": {"completions": 4}, "status": {"succeeded": 3, "active": 1}})


def _event(kind: str, obj: dict[str, Any], at: float) -> WatchEvent:
    return WatchEvent(kind, obj, at)


def test_each_generation_is_timed_from_asked_to_done() -> None:
    probe = ControlledPodsProbe(ClusterAccess(server="https://127.0.0.1:1", kubeconfig="/nonexistent"),
                                ["Deployment", "ConfigMap"], "x=y")
    assert probe.kinds == ["Deployment"]  # kinds without pods are not watched
    on = probe.on_event
    on("Deployment", _event("ADDED", _deployment(1, 0, 3, 0, 0, 0), 10.0))
    on("Deployment", _event("MODIFIED", _deployment(1, 1, 3, 1, 3, 3), 10.5))
    on("Deployment", _event("MODIFIED", _deployment(1, 1, 3, 3, 3, 3), 12.0))  # done: 2.0 s
    on("Deployment", _event("MODIFIED", _deployment(2, 1, 3, 3, 3, 3), 20.0))  # its template updated
    on("Deployment", _event("MODIFIED", _deployment(2, 2, 3, 3, 3, 6), 20.2))
    on("Deployment", _event("MODIFIED", _deployment(2, 2, 3, 3, 3, 3), 23.5))  # done: 3.5 s
    on("Deployment", _event("MODIFIED", _deployment(2, 2, 3, 3, 3, 3), 24.0))  # again: changes nothing
    on("Deployment", _event("MODIFIED", _deployment(3, 2, 6, 3, 3, 3), 30.0))  # scaled ...
    on("Deployment", _event("MODIFIED", _deployment(4, 2, 2, 3, 3, 3), 30.5))  # ... and again before done
    on("Deployment", _event("DELETED", _deployment(4, 2, 2, 3, 3, 3), 31.0))  # then deleted first
    other = _deployment(1, 0, 2, 0, 0, 0)
    other["metadata"]["name"] = "api"
    on("Deployment", _event("ADDED", other, 40.0))  # never done in the window
    found = probe.gather()["Deployment"]
    assert found.running.count == 2 and found.running.max == 3.5 and found.running.p50 == 2.0
    assert list(found.slowest) == ["ns/web (generation 2)", "ns/web (generation 1)"]
    assert found.deleted_first == 1 and found.superseded == 1  # generation 3 replaced, generation 4 deleted
    assert found.unfinished == 1 and found.unfinished_named == ["ns/api (generation 1)"]


def test_the_report_shows_each_kind_and_says_a_small_p99_is_the_maximum(tmp_path) -> None:
    from loadtests.report.html import write_report
    from tests.unit.reportdata import SAMPLE, edited_run

    def edit(data: dict) -> None:
        data["steps"][0]["controlled"] = {"Deployment": {
            "running": {"count": 3, "p50": 0.8, "p90": 2.1, "p99": 2.1, "max": 2.1, "source": "watch"},
            "slowest": {"ns/web (generation 2)": 2.1}, "deleted_first": 1, "superseded": 4, "unfinished": 2,
            "unfinished_named": ["ns/api (generation 1)", "ns/db (generation 3)"]}}

    html = write_report(edited_run(SAMPLE, tmp_path / "run", edit)).read_text(encoding="utf-8")
    assert html.count("<h3>Controlled pods running</h3>") == 1  # only the step that has it
    row = html[html.index("<td>Deployment</td>"):].split("</tr>")[0]
    assert "max of 3" in row and "ns/web (generation 2) 2.10 s" in row
    assert 'title="ns/api (generation 1), ns/db (generation 3)">2<' in row
