"""A highly available control plane, as a user starts one: `loadtest up --etcd-members 3 --apiservers 2`, every
client through HAProxy, which takes an apiserver that stops answering out of rotation, or node agents spread over
the apiservers' own addresses; `loadtest down` leaves no process and no port. And a run on such a plane reads every
apiserver's requests, not the one a scrape reached."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from loadtests import results
from loadtests.controlplane import haproxy
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.controlplane.processes import ClusterState, http_ok, wait_for
from loadtests.kube.errors import ApiError
from loadtests.kube.objects import node_name
from loadtests.kube.rest import RestClient
from tests.checks import assert_nothing_left
from tests.cli import loadtest, private_cache, write_tiny_plan
from tests.watched import WatchedRun

pytestmark = pytest.mark.skipif(not haproxy.shutil.which("haproxy"), reason="HAProxy is not installed (make setup)")


def test_up_with_three_etcd_members_and_two_apiservers_serves_through_haproxy(bins, tmp_path: Path) -> None:
    env = private_cache(tmp_path / "cache")
    up = loadtest("up", "--name", "ha", "--etcd-members", "3", "--apiservers", "2", "--nodes", "5", env=env,
                  timeout=240)
    folder = tmp_path / "cache" / "clusters" / "ha"
    state = ClusterState.load(folder)
    assert state is not None
    records = list(state.processes)
    sock = LocalControlPlane(LocalOptions(name="ha", directory=folder)).haproxy_socket
    try:
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        names = [r.component for r in records]
        assert names[:6] == ["etcd", "etcd-2", "etcd-3", "kube-apiserver", "kube-apiserver-2", "haproxy"], names
        assert len(state.apiservers) == 2 and state.server not in state.apiservers.values()  # clients: the balancer
        plane = LocalControlPlane(LocalOptions(name="ha", directory=folder))
        client = RestClient(plane.access())
        assert len(client.list_items("nodes")) == 5  # kwok's nodes, registered through HAProxy
        sock = plane.haproxy_socket
        assert haproxy.servers_up(sock) == {"kube-apiserver": True, "kube-apiserver-2": True}
        for member in ("etcd", "etcd-2", "etcd-3"):  # one cluster: every member has a leader to answer with
            assert http_ok(state.etcd_members[member].replace("/metrics", "/health"), expect=b'"health":"true"')
        status = json.loads(loadtest("status", "--name", "ha", "--json", env=env).stdout)
        assert all(c["alive"] for c in status["components"]) and len(status["components"]) == 9

        # node agents spread over the apiservers' own addresses: node i's to the (i mod 2)-th, no HAProxy between
        names = [node_name(i) for i in range(2)]
        spread = replace(plane.node_identities(names), servers=tuple(state.apiservers.values()))
        kubelets = [RestClient(spread.node_access(name)) for name in names]
        assert [k.access.server for k in kubelets] == list(state.apiservers.values())
        assert ([k.get(f"/api/v1/nodes/{name}")["metadata"]["name"] for k, name in zip(kubelets, names, strict=True)]
            == names)

        # the second apiserver dies: HAProxy's /readyz checks take it out, and every request still succeeds
        second = next(r for r in records if r.component == "kube-apiserver-2")
        os.kill(second.pid, signal.SIGKILL)
        wait_for(lambda: haproxy.servers_up(sock).get("kube-apiserver-2") is False, 15,
                 "HAProxy taking the dead apiserver out")
        assert all(len(client.list_items("nodes")) == 5 for _ in range(20))
        client.close()
        # the node sent to it reached it directly: it has lost its apiserver; the other node has not
        assert kubelets[0].get(f"/api/v1/nodes/{names[0]}")["metadata"]["name"] == names[0]
        with pytest.raises(ApiError) as lost:
            kubelets[1].get(f"/api/v1/nodes/{names[1]}")
        assert lost.value.status == 0
        for kubelet in kubelets:
            kubelet.close()
    finally:
        down = loadtest("down", "--name", "ha", env=env, timeout=120)
    assert down.returncode == 0, down.stderr
    assert "haproxy" in down.stdout
    assert_nothing_left(records)
    assert not folder.exists() and not sock.exists()


HA = "topology: {etcd_members: 3, apiservers: 2}"


def test_a_run_survives_one_apiserver_and_one_etcd_member_and_reads_every_apiserver(bins, tmp_path: Path) -> None:
    """Both lost while step 2 measures: events of the step, not the run's end. Step 1's figures, both
    apiservers up, cover the requests of both (were one apiserver's page read, about half)."""
    run = WatchedRun(tmp_path, plan=write_tiny_plan(tmp_path / "ha.yaml", "ha-run", (8, 25), target=HA))
    run.wait_second_step_loaded()
    for name in ("kube-apiserver-2", "etcd-3"):
        os.kill(run.component(name).pid, signal.SIGKILL)
    code = run.finish(timeout_s=240)
    saved = results.load(run.out)
    assert saved.status == "complete" and code in (0, 1), run.stdout[-3000:] + run.stderr[-2000:]
    first, second = saved.steps
    events = [e.what for e in second.events]
    assert any(e.startswith("kube-apiserver-2 ") and e.endswith("1 of 2 kube-apiserver left") for e in events)
    assert any(e.startswith("etcd-3 ") and e.endswith("2 of 3 etcd left") for e in events), events
    assert any("kube-apiserver-2 /metrics not read" in note for note in second.notes), second.notes
    assert "event" in (run.out / "report.html").read_text()
    assert {"kube-apiserver", "kube-apiserver-2", "haproxy", "etcd-3"} <= {p.component for p in first.processes}
    served = max(s.count for s in first.server if (s.verb, s.resource, s.subresource) == ("POST", "pods", ""))
    audited = sum(r.count for r in first.audit.requests if (r.verb, r.resource) == ("POST", "pods"))
    assert audited > 5 and abs(served - audited) <= 0.15 * audited, (served, audited)
    assert "each of 2 apiservers" in first.audit.source
    members = first.etcd.members  # each member's own figures, one of them the leader
    assert list(members) == ["etcd", "etcd-2", "etcd-3"] and sum(bool(m.leader) for m in members.values()) == 1
    assert all(m.db_size_bytes for m in members.values()) and first.etcd.db_size_bytes == max(
        m.db_size_bytes for m in members.values())
    assert any("etcd-3 /metrics not read" in note for note in second.notes), second.notes
    assert_nothing_left(run.seen)


def test_losing_etcd_s_quorum_ends_the_run_in_one_line(bins, tmp_path: Path) -> None:
    """Its first step only has to finish and be kept (3 s of window do it) before the quorum is lost in the
    second."""
    run = WatchedRun(tmp_path, plan=write_tiny_plan(tmp_path / "ha.yaml", "ha-quorum", (3, 30), target=HA))
    run.wait_second_step_loaded()
    for name in ("etcd-2", "etcd-3"):
        os.kill(run.component(name).pid, signal.SIGKILL)
    assert run.finish(timeout_s=180) == 3, run.stdout[-3000:] + run.stderr[-2000:]
    errors = run.errors()
    assert len(errors) == 1 and "2 of 3 etcd lost: more than the 1 the cluster survives" in errors[0], errors
    assert len(results.load(run.out).steps) == 1  # the finished step kept
    assert_nothing_left(run.seen)


ROLLING_PLAN = """
name: rolling-check
target:
  unresponsive_s: 30
  # an apiserver holds its open watches until its 60 s shutdown deadline unless told to close them sooner
  component_args: {kube-apiserver: ["--shutdown-watch-termination-grace-period=5s"]}
steps:
  - {nodes: 5, pods_per_node: 1, warmup_s: 1, duration_s: 70, name: roll}
load:
  scenarios:
    pod_churn: {rate: 2, lifetime_s: 3, users: 1}
    informers: {count: 5, resource: pods}
roll: {steady_s: 10, pause_s: 2, probe_qps: 10, recovery_s: 40}
"""


def test_a_rolling_upgrade_replaces_every_component_under_load_and_judges_the_seconds(bins, tmp_path: Path) -> None:
    """`loadtest rehearse --rolling` from the previous version to this one: both apiservers (out of HAProxy's
    rotation first), then the controller-manager and scheduler, each on the new binary, while the load and the
    availability probe run; the verdicts, the timeline and the exit code follow from what was measured."""
    from loadtests.analysis.roll import figures, verdicts
    from loadtests.binaries import cache as binaries
    from loadtests.config import versions

    old, new = versions.PREVIOUS_KUBE_VERSION, versions.DEFAULT_KUBE_VERSION
    binaries.find(old)  # `make test` provides both
    plan = tmp_path / "rolling.yaml"
    plan.write_text(ROLLING_PLAN)
    out = tmp_path / "rolling"
    env = private_cache(tmp_path / "cache")
    proc = loadtest("rehearse", "--rolling", "--plan", str(plan), "--from", old, "--to", new, "--out", str(out),
                    env=env, timeout=600)
    run = results.load(out)
    assert len(run.steps) == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    (step,) = run.steps
    roll = step.roll
    assert roll is not None and run.status == "complete", proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [m.instance for m in roll.marks] == ["kube-apiserver", "kube-apiserver-2", "kube-controller-manager",
                                                "kube-scheduler"], proc.stdout[-3000:]
    assert all(m.version == new for m in roll.marks) and roll.finished_at_s is not None and roll.error is None
    assert all(m.out_at_s < m.ready_at_s <= m.back_at_s for m in roll.marks)
    assert roll.marks[0].back_at_s <= roll.marks[1].out_at_s  # one at a time
    assert roll.started_at_s >= 10 and len([s for s in roll.seconds if s.t < roll.started_at_s]) >= 5
    found = figures(roll)
    assert found.sent >= 5 * found.roll_seconds  # the probe kept sending through the roll (10 a second asked)
    assert set(roll.hosts_ready) == {"kube-apiserver", "kube-apiserver-2"}
    assert all(share < 1.0 for share in roll.hosts_ready.values())  # each was down while it was replaced
    checks = {v.check: v.passed for v in verdicts(step)}
    assert checks["roll completed"] is True and checks["nodes stayed Ready"] is not None
    # the exit code is the verdicts': 1 when a roll check (or an SLO) failed, 0 when all held
    assert proc.returncode == (0 if all(v is not False for v in checks.values()) and "PASS" in proc.stdout
                               else 1), proc.stdout[-2000:]
    assert {"kube-apiserver", "kube-apiserver-2"} <= {p.component for p in step.processes}
    page = (out / "report.html").read_text()
    assert f"Rolling upgrade {old} → {new}" in page and "chart-roll_0" in page
    junit = (out / "junit.xml").read_text()
    assert "rolling upgrade: step 0: roll" in junit and "availability" in junit
