"""A highly available control plane, as a user starts one: `loadtest up --etcd-members 3 --apiservers 2`, every
client through HAProxy, which takes an apiserver that stops answering out of rotation; `loadtest down` leaves no
process and no port. And a run on such a plane reads every apiserver's requests, not the one a scrape reached."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from loadtests import results
from loadtests.controlplane import haproxy
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.controlplane.processes import ClusterState, http_ok, wait_for
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

        # the second apiserver dies: HAProxy's /readyz checks take it out, and every request still succeeds
        second = next(r for r in records if r.component == "kube-apiserver-2")
        os.kill(second.pid, signal.SIGKILL)
        wait_for(lambda: haproxy.servers_up(sock).get("kube-apiserver-2") is False, 15,
                 "HAProxy taking the dead apiserver out")
        assert all(len(client.list_items("nodes")) == 5 for _ in range(20))
        client.close()
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
    run = WatchedRun(tmp_path, plan=write_tiny_plan(tmp_path / "ha.yaml", "ha-quorum", (8, 30), target=HA))
    run.wait_second_step_loaded()
    for name in ("etcd-2", "etcd-3"):
        os.kill(run.component(name).pid, signal.SIGKILL)
    assert run.finish(timeout_s=180) == 3, run.stdout[-3000:] + run.stderr[-2000:]
    errors = run.errors()
    assert len(errors) == 1 and "2 of 3 etcd lost: more than the 1 the cluster survives" in errors[0], errors
    assert len(results.load(run.out).steps) == 1  # the finished step kept
    assert_nothing_left(run.seen)
