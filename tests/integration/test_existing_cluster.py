"""An existing cluster, as someone else runs it: refused until confirmed, load-tested, and left as it was found.

"Someone else's" cluster is a real local control plane without a kwok controller, holding a namespace, a
ConfigMap and a node of its own; the harness must bring its own kwok and take away only what it created.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from loadtests import results
from loadtests.analysis import profiles
from loadtests.binaries import cache as binaries
from loadtests.config import plan as plan_mod
from loadtests.config import versions
from loadtests.config.cl2 import load_mix
from loadtests.controlplane.existing import KWOK_NAMESPACE, ClusterOptions, ExistingCluster, guard
from loadtests.controlplane.local import LocalControlPlane
from loadtests.controlplane.processes import wait_for
from loadtests.errors import TargetError
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.run.fleet import Fleet
from tests.checks import running_plane
from tests.cli import error_lines, loadtest

CONTEXT = "loadtest"  # the context name of the kubeconfig a local control plane writes
THEIR_NAMESPACE, THEIR_CONFIGMAP, THEIR_NODE = "theirs", "their-settings", "their-worker-1"
WIDGETS_CRD = "widgets.loadtest.example.com"  # what the bundled custom-resources plan installs
KWOK_PID = re.compile(r"kwok \S+ runs here \(pid (\d+),")


@pytest.fixture(scope="module")
def their_plane(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """A control plane with objects of its own and no kwok controller; stopped (and checked) at the end."""
    with running_plane(bins, tmp_path_factory.mktemp("theirs"), f"theirs-{os.getpid()}", kwok=False) as plane, \
            contextlib.closing(RestClient(plane.access())) as client:
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": THEIR_NAMESPACE}})
        client.create(f"/api/v1/namespaces/{THEIR_NAMESPACE}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": THEIR_CONFIGMAP},
            "data": {"owner": "someone else"}})
        client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": THEIR_NODE, "labels": {"kubernetes.io/hostname": THEIR_NODE, "kubernetes.io/os": "linux"}}})
        yield plane


@pytest.fixture()
def theirs(their_plane: LocalControlPlane) -> Iterator[RestClient]:
    client = RestClient(their_plane.access())
    yield client
    client.close()


def kubeconfig(plane: LocalControlPlane) -> str:
    return plane.access().kubeconfig


def plan_file(folder: Path, plane: LocalControlPlane) -> Path:
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump({
        "name": "existing",
        "target": {"kind": "cluster", "kubeconfig": kubeconfig(plane)},
        "steps": [{"nodes": 5, "pods_per_node": 1, "duration_s": 10, "warmup_s": 1}],
        "load": {"scenarios": {"pod_churn": {"rate": 2}, "list_pollers": {"rate": 1}}},
    }))
    return path


def assert_nothing_of_ours_left(client: RestClient) -> None:
    """No harness namespace (waiting out Terminating ones), no harness node; theirs all still there."""
    def ours_gone() -> bool:
        namespaces = [client.request("GET", f"/api/v1/namespaces/{n}", ok=(404,))
                      for n in (*objects.NAMESPACES, KWOK_NAMESPACE)]
        return not any(namespaces)

    wait_for(ours_gone, 90, "harness namespaces gone", interval_s=1.0)
    nodes = client.list_items("nodes", label_selector=objects.NODE_SELECTOR)
    assert nodes == []
    # nothing the objects scenario made or installed: its namespaces, the bundled CRD
    assert [n["metadata"]["name"] for n in client.list_items("namespaces")
            if n["metadata"]["name"].startswith(objects.NS_OBJECTS_PREFIX)] == []
    assert not client.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{WIDGETS_CRD}",
                              ok=(404,))
    assert client.get(f"/api/v1/namespaces/{THEIR_NAMESPACE}")["status"]["phase"] == "Active"
    configmap = client.get(f"/api/v1/namespaces/{THEIR_NAMESPACE}/configmaps/{THEIR_CONFIGMAP}")
    assert configmap["data"] == {"owner": "someone else"}
    assert client.get(f"/api/v1/nodes/{THEIR_NODE}")["metadata"]["name"] == THEIR_NODE


def pid_gone(pid: int, seen_at: float) -> bool:
    """Whether the process that had this pid at `seen_at` has ended (a newer process may reuse the pid)."""
    try:
        proc = psutil.Process(pid)
        return proc.create_time() > seen_at or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def existing(plane: LocalControlPlane, messages: list[str] | None = None) -> ExistingCluster:
    log: Any = messages.append if messages is not None else (lambda _m: None)
    return ExistingCluster(ClusterOptions(context=guard(kubeconfig(plane), CONTEXT, CONTEXT), kwok_mode="local"),
                           log=log)


# ---------------------------------------------------------------------------------------------- tests
def test_guard_refuses_without_allow_context(their_plane: LocalControlPlane, theirs: RestClient,
                                             tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = loadtest("run", "--plan", str(plan_file(tmp_path, their_plane)), "--kubeconfig",
                      kubeconfig(their_plane), "--context", CONTEXT, "--out", str(out), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert f"refusing to load-test context '{CONTEXT}'" in lines[0]
    assert lines[0].endswith(f"confirm with --allow-context {CONTEXT}")
    assert not out.exists() or not any(out.iterdir())
    assert_nothing_of_ours_left(theirs)


def test_refuses_next_to_another_runs_nodes_and_leaves_them(their_plane: LocalControlPlane,
                                                            theirs: RestClient) -> None:
    leftover = objects.node_name(0)
    theirs.create("/api/v1/nodes", objects.node_manifest(leftover))
    try:
        target = existing(their_plane)
        with pytest.raises(TargetError) as caught:
            target.up()
        message = str(caught.value)
        assert "\n" not in message and leftover in message
        assert f"delete nodes -l {objects.NODE_SELECTOR}" in message
        target.down()
        assert theirs.get(f"/api/v1/nodes/{leftover}")["metadata"]["name"] == leftover  # not ours to delete
        assert target.workdir is None
    finally:
        theirs.delete(f"/api/v1/nodes/{leftover}")


def test_up_runs_our_kwok_on_loopback_and_down_removes_only_ours(their_plane: LocalControlPlane,
                                                                 theirs: RestClient) -> None:
    messages: list[str] = []
    target = existing(their_plane, messages)
    info = target.up()
    try:
        assert info.kind == "cluster" and info.etcd_metrics_url is None
        assert info.versions == {"kubernetes": versions.DEFAULT_KUBE_VERSION, "kwok": versions.KWOK_VERSION}
        [kwok_pid] = info.pids["kwok"]
        addresses = {c.laddr.ip for c in psutil.net_connections("tcp")
                     if c.pid == kwok_pid and c.status == psutil.CONN_LISTEN}
        assert addresses == {"127.0.0.1"}
        workdir = target.workdir
        assert workdir is not None and os.stat(workdir).st_mode & 0o777 == 0o700
        assert os.stat(info.access.kubeconfig).st_mode & 0o777 == 0o600
        assert target.dead_components() == []

        client = RestClient(info.access)  # built from the kubeconfig's context, like every client of a run
        try:
            fleet = Fleet(client)
            fleet.ensure_namespaces()
            ramp = fleet.scale_nodes(3, timeout_s=60)  # Ready only if our kwok manages them
            assert ramp.nodes == 3
            fleet.scale_pods(3, timeout_s=60)
        finally:
            client.close()
        seen_at = time.time()
    finally:
        target.down()
    assert sorted(target.deleted_nodes) == [objects.node_name(i) for i in range(3)]
    assert pid_gone(kwok_pid, seen_at)
    assert not workdir.exists()
    assert target.dead_components() == []
    assert_nothing_of_ours_left(theirs)
    target.down()  # a second time: nothing left to do


def test_a_run_against_the_existing_cluster_leaves_it_as_it_was(their_plane: LocalControlPlane,
                                                               theirs: RestClient, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = loadtest("run", "--plan", str(plan_file(tmp_path, their_plane)), "--kubeconfig",
                      kubeconfig(their_plane), "--context", CONTEXT, "--allow-context", CONTEXT,
                      "--no-gate", "--out", str(out), timeout=300)
    finished = time.time()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "warning: teardown" not in result.stdout, result.stdout
    run = results.load(out)
    assert run.status == "complete"
    assert len(run.steps) == 1
    assert run.steps[0].client and sum(c.count for c in run.steps[0].client) > 0
    assert run.environment["server"] == "existing cluster"
    assert run.environment["versions"]["kubernetes"] == versions.DEFAULT_KUBE_VERSION
    # who its clients are to flow control, asked of the cluster at the start: every class sends as the
    # kubeconfig's user here, an admin, so all are exempt
    assert [c.client for c in run.clients] == ["harness", "load", "nodes joining"], run.clients
    assert all((c.flow_schema, c.priority_level, c.exempt) == ("exempt", "exempt", True) for c in run.clients)
    # profiled where it can be: the apiserver's /debug/pprof answers the kubeconfig's user, etcd is out of reach
    step = run.steps[0]
    cpu = profiles.find(step.profiles, "kube-apiserver", "cpu")
    assert cpu is not None and cpu.seconds == 10 and (out / cpu.files[0]).is_file(), step.profiles
    assert [p.component for p in step.profiles if p.component != "kube-apiserver"] == []
    assert [n for n in step.notes if n.startswith("not profiled")] == ["not profiled: etcd: not reachable on this "
                                                                       "target"], step.notes

    match = KWOK_PID.search(result.stdout)
    assert match, result.stdout
    assert pid_gone(int(match.group(1)), finished)
    assert (out / "control-plane-logs" / "kwok.log").is_file()
    assert_nothing_of_ours_left(theirs)


CUSTOM_RESOURCES_WINDOW_S = 12  # each object updated (every 5 s) and scaled (every 8 s) within it


def test_the_custom_resources_plan_removes_its_crd_and_namespaces(their_plane: LocalControlPlane,
                                                                  theirs: RestClient, tmp_path: Path) -> None:
    """The bundled plan, its windows cut from 30 s to 12: what is checked is that each step creates Widgets and
    ConfigMaps at the asked rate and that the CRD, the Widgets and their namespaces are gone afterwards, which a
    shorter window checks as well (the Widgets it leaves alive, younger than their 20 s lifetime, must go too)."""
    bundled = yaml.safe_load((plan_mod.PLANS_DIR / "custom-resources.yaml").read_text())
    for step in bundled["steps"]:
        step["duration_s"] = CUSTOM_RESOURCES_WINDOW_S
    plan = tmp_path / "custom-resources.yaml"
    plan.write_text(yaml.safe_dump(bundled))
    out = tmp_path / "out"
    result = loadtest("run", "--plan", str(plan), "--kubeconfig", kubeconfig(their_plane), "--context",
                      CONTEXT, "--allow-context", CONTEXT, "--no-gate", "--out", str(out), timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "warning:" not in result.stdout, result.stdout
    run = results.load(out)
    assert run.status == "complete" and len(run.steps) == 2
    for step in run.steps:
        created = {c.name: c.count - c.failures for c in step.client if c.type == "POST"}
        assert created.get("POST Widget (objects)", 0) > 0 and created.get("POST ConfigMap (objects)", 0) > 0
        rate = next(r for r in step.rates if r.scenario == "objects")
        assert rate.achieved_per_s >= 0.7 * rate.asked_per_s, step.rates
        assert any(s.resource == "widgets" for s in step.server)  # the apiserver's own rows, per kind
    assert_nothing_of_ours_left(theirs)


def test_the_cl2_smoke_plan_runs_its_five_phases_and_leaves_nothing(their_plane: LocalControlPlane,
                                                                      theirs: RestClient, tmp_path: Path) -> None:
    """ClusterLoader2's load test in miniature: its mix created, scaled and updated, deleted, each phase its own
    window with controlled pods running per kind and the rate asked and achieved; nothing of it left."""
    out = tmp_path / "cl2"
    result = loadtest("run", "--plan", "cl2-smoke", "--kubeconfig", kubeconfig(their_plane), "--context", CONTEXT,
                      "--allow-context", CONTEXT, "--no-gate", "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "warning:" not in result.stdout, result.stdout
    run = results.load(out)
    assert run.status == "complete"
    assert [s.phase for s in plan_mod.load("cl2-smoke").steps] == [s.name.split(" · ")[1] for s in run.steps]
    mix = load_mix(20, 10)
    create, scale, delete, scheduler, startup = run.steps
    # every controlling object's pods ran: the mix's count of each kind timed once, none left undone
    wanted = {kind: mix.per_namespace(kind) * mix.namespaces
              for kind in ("Deployment", "StatefulSet", "Job", "DaemonSet")}
    assert {kind: c.running.count for kind, c in create.controlled.items()} == wanted, create.controlled
    assert all(c.unfinished == 0 for c in create.controlled.values()), create.notes
    assert create.objects["deployments"] >= wanted["Deployment"] and create.objects["jobs"] == wanted["Job"]
    assert create.objects["secrets"] >= mix.per_namespace("Secret")
    # scaled and updated: every Deployment rolled to its new size
    assert scale.controlled["Deployment"].running.count == wanted["Deployment"], scale.controlled
    assert all(c.unfinished == 0 for c in scale.controlled.values()), scale.notes
    for step, phase in ((create, "cl2-create"), (scale, "cl2-scale"), (delete, "cl2-delete")):
        rate = next(r for r in step.rates if r.scenario == phase)
        assert rate.asked_per_s == 10 and rate.unit == "pods" and rate.achieved_per_s >= 7, step.rates
        assert not [n for n in step.notes if "ran out" in n], step.notes
    assert any(s.verb == "POST" and s.resource == "deployments" for s in create.server)
    assert delete.objects["jobs"] == 0 and delete.objects["statefulsets"] == 0  # gone before the window closed
    assert delete.controlled == {}  # nothing asked for pods while deleting
    # the scheduler's throughput on its pods at once, judged on the best interval; the latency pods' startup
    assert scheduler.scheduling is not None and scheduler.scheduling.pods == 200
    assert scheduler.scheduling.samples and scheduler.scheduling.passed is not None, scheduler.scheduling
    assert scheduler.controlled["Deployment"].running.count == 1
    assert startup.pod_startup.count == 50 and startup.pod_startup.p99 is not None
    html = (out / "report.html").read_text()
    assert html.count("<h3>Controlled pods running</h3>") == sum(1 for s in run.steps if s.controlled)
    assert html.count("<h3>Scheduling throughput</h3>") == 1
    # a phase's window is profiled in 10 s pieces from its start, the piece under way at its close cut off
    cpu = [profiles.find(step.profiles, "kube-apiserver", "cpu") for step in run.steps]
    assert any(cpu), [step.notes for step in run.steps]
    for step, found in zip(run.steps, cpu, strict=True):
        if found is not None:
            assert found.seconds == 10 * len(found.files) <= step.duration_s, (found, step.duration_s)
    assert_nothing_of_ours_left(theirs)
    assert theirs.list_items("priorityclasses", label_selector=objects.MANAGED_BY_SELECTOR) == []


def test_in_cluster_kwok_is_applied_and_removed_when_it_cannot_start(their_plane: LocalControlPlane,
                                                                      theirs: RestClient) -> None:
    """There is no real node here to run kwok's pod: up gives up with the pod's reason, and takes it all away."""
    options = ClusterOptions(context=guard(kubeconfig(their_plane), CONTEXT, CONTEXT), kwok_mode="in-cluster",
                             kwok_ready_timeout_s=10)
    target = ExistingCluster(options, log=lambda _m: None)
    with pytest.raises(TargetError) as caught:
        target.up()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("kwok Deployment Available: not reached within 10 s")
    assert "kwok-controller" in message  # the pod's own account of why it does not run
    for path in ("/apis/rbac.authorization.k8s.io/v1/clusterroles/k8s-loadtest-kwok",
                 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/k8s-loadtest-kwok"):
        assert theirs.request("GET", path, ok=(404,)) == {}
    assert_nothing_of_ours_left(theirs)
