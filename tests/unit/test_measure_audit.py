"""The audit log read over a step's window: clients told apart, counts and latencies summed, rotation followed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from loadtests.controlplane.audit import AuditLog, audit_destination
from loadtests.errors import PlanError
from loadtests.measure.audit import AuditReader, client_of, scope_of
from loadtests.report.audit import client_costs, clients_of, origins
from loadtests.results import StepResult
from loadtests.results.apiserver import ServerLatency
from loadtests.results.audit import AuditRow
from tests.cli import error_lines, loadtest, write_tiny_plan

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
SCHEDULER = "kube-scheduler/v1.37.2 (linux/amd64) kubernetes/abcdef0/scheduler"
RS_CONTROLLER = ("kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abcdef0/"
                 "system:serviceaccount:kube-system:replicaset-controller")


def _stamp(t: datetime) -> str:
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def event(at_s: float, latency_s: float, agent: str, verb: str, resource: str, *, namespace: str = "",
          name: str = "", code: int = 200, stage: str = "ResponseComplete", user: str = "admin",
          subresource: str = "") -> str:
    received = T0 + timedelta(seconds=at_s)
    ref = {"resource": resource, "apiVersion": "v1"}
    if namespace:
        ref["namespace"] = namespace
    if name:
        ref["name"] = name
    if subresource:
        ref["subresource"] = subresource
    return json.dumps({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": "x", "stage": stage,
        "requestURI": "/api/v1/" + resource, "verb": verb, "user": {"username": user, "groups": []},
        "sourceIPs": ["127.0.0.1"], "userAgent": agent, "objectRef": ref,
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": _stamp(received),
        "stageTimestamp": _stamp(received + timedelta(seconds=latency_s)),
    }) + "\n"


def test_clients_are_named_from_user_agents() -> None:
    assert client_of("k8s-loadtest/pod_churn", "admin") == "k8s-loadtest/pod_churn"
    assert client_of(SCHEDULER, "system:kube-scheduler") == "kube-scheduler"
    assert client_of(RS_CONTROLLER, "system:serviceaccount:kube-system:replicaset-controller") == \
        "kube-controller-manager (replicaset-controller)"
    assert client_of("kwok/v0.8.0 (linux/amd64)", "admin") == "kwok"
    assert client_of("", "someone") == "(no user agent) someone"
    assert scope_of("create", "ns", "") == "resource"
    assert scope_of("list", "ns", "") == "namespace" and scope_of("list", "", "") == "cluster"
    assert scope_of("list", "ns", "one") == "namespace" and scope_of("get", "ns", "one") == "resource"


def test_window_counts_clients_latency_and_codes(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(event(-5, 0.01, "k8s-loadtest/pod_churn", "create", "pods", namespace="churn"))  # before
    reader = AuditReader(log)
    reader.start()
    lines = [event(1 + i * 0.1, 0.02, "k8s-loadtest/pod_churn", "create", "pods", namespace="churn")
             for i in range(20)]
    lines += [event(2, 0.5, "k8s-loadtest/list_pollers", "list", "pods")]
    lines += [event(3, 0.0, SCHEDULER, "create", "pods", namespace="churn", name="p1", subresource="binding")]
    lines += [event(4, 0.001, "k8s-loadtest/pod_churn", "create", "pods", namespace="churn", code=429)]
    # a watch: counted once when it starts, its end adds no latency
    lines += [event(5, 0.0, "k8s-loadtest/kubelet_watchers", "watch", "pods", stage="ResponseStarted"),
              event(5, 30.0, "k8s-loadtest/kubelet_watchers", "watch", "pods")]
    lines += [event(6, 9.0, "kwok/v0.8.0", "update", "leases", namespace="kube-node-lease", name="n1",
                    stage="RequestReceived")]  # not a finished request
    lines += ['{"broken": \n', event(100, 0.01, "k8s-loadtest/pod_churn", "create", "pods", namespace="churn")]
    with log.open("a") as handle:
        handle.writelines(lines)
    summary = reader.gather(T0.timestamp(), T0.timestamp() + 60)
    rows = {(r.client, r.verb, r.resource, r.scope): r for r in summary.requests}
    creates = rows[("k8s-loadtest/pod_churn", "POST", "pods", "resource")]
    assert creates.count == 21 and creates.codes == {"200": 20, "429": 1}
    assert creates.apiserver_s == pytest.approx(20 * 0.02 + 0.001, abs=1e-4)
    assert rows[("k8s-loadtest/list_pollers", "LIST", "pods", "cluster")].p99_s == pytest.approx(0.5, abs=1e-4)
    assert ("kube-scheduler", "POST", "pods/binding", "resource") in rows
    watch = rows[("k8s-loadtest/kubelet_watchers", "WATCH", "pods", "cluster")]
    assert watch.count == 1 and watch.apiserver_s == 0
    assert summary.events == 24
    assert summary.slowest[0].client == "k8s-loadtest/list_pollers" and summary.slowest[0].at_s == pytest.approx(2)
    costs = client_costs(StepResult(0, "s", 10, 0, "", 60, audit=summary))
    assert costs[0].client == "k8s-loadtest/list_pollers" and costs[1].client == "k8s-loadtest/pod_churn"
    assert costs[1].errors == 1 and sum(c.share_requests for c in costs) == pytest.approx(1)


def test_reads_on_across_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(event(-1, 0.01, "old", "get", "pods", name="x"))
    reader = AuditReader(log)
    reader.start()
    with log.open("a") as handle:
        handle.write(event(1, 0.01, "k8s-loadtest/fleet", "create", "nodes", name="a"))
    rotated = tmp_path / "audit-2026-11-30T12-00-02.000.log"
    log.rename(rotated)  # what the apiserver's rotation does: the live file moves away, a new one starts
    log.write_text(event(3, 0.01, "k8s-loadtest/fleet", "create", "nodes", name="b"))
    summary = reader.gather(T0.timestamp(), T0.timestamp() + 60)
    assert [(r.client, r.count) for r in summary.requests] == [("k8s-loadtest/fleet", 2)]
    assert summary.notes == []


def test_a_window_rotated_away_is_said(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(event(-1, 0.01, "old", "get", "pods", name="x"))
    reader = AuditReader(log)
    reader.start()
    log.unlink()  # rotated and dropped: more rotations than backups kept
    log.write_text(event(3, 0.01, "k8s-loadtest/fleet", "create", "nodes", name="b"))
    summary = reader.gather(T0.timestamp(), T0.timestamp() + 60)
    assert summary.events == 1 and "rotated past the window's start" in summary.notes[0]


def audited_step(*rows: AuditRow) -> StepResult:
    """A step whose audit log read gave these rows."""
    step = StepResult(0, "s", 10, 0, "", 60)
    step.audit.source = "apiserver audit log"
    step.audit.requests = list(rows)
    return step


def test_clients_behind_a_server_entry() -> None:
    log_rows = audited_step(
        AuditRow("k8s-loadtest/list_pollers", "LIST", "pods", "cluster", "", 60, 10.0, 1.2),
        AuditRow("kube-controller-manager (replicaset-controller)", "LIST", "pods", "cluster", "", 5, 0.1, 0.03),
        AuditRow("k8s-loadtest/informers", "LIST", "pods", "namespace", "", 7, 0.1, 0.03),
    )
    entry = ServerLatency("LIST", "pods", "cluster", "", "", 65, 0.1, 0.2, 5.35)
    clients = clients_of(log_rows, entry)
    assert clients is not None and clients.audited == 65
    assert clients.describe() == "k8s-loadtest/list_pollers 92 %, kube-controller-manager (replicaset-controller) 8 %"
    assert clients_of(StepResult(0, "s", 10, 0, "", 60), entry) is None


def test_audit_flags_and_policy(tmp_path: Path) -> None:
    flags = AuditLog(tmp_path, max_size_mb=50, max_backups=2).apiserver_flags()
    assert f"--audit-log-path={tmp_path / 'audit.log'}" in flags and "--audit-log-maxsize=50" in flags
    policy = (tmp_path / "audit-policy.yaml").read_text()
    assert "level: Metadata" in policy and "RequestReceived" in policy and "Request\n" not in policy


def test_bad_audit_destinations_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"audit.dir .*missing: no such folder; create it"):
        audit_destination(str(tmp_path / "missing"), tmp_path / "run")
    with pytest.raises(PlanError, match="does not take files"):
        audit_destination("/proc", tmp_path / "run")
    assert audit_destination(None, tmp_path / "run") == tmp_path / "run" / "audit"


@pytest.mark.parametrize(("audit_dir", "message"), [
    ("{tmp}/nowhere", "audit.dir {tmp}/nowhere: no such folder; create it"),
    ("/proc", "audit log folder /proc does not take files"),
])
def test_run_with_a_bad_audit_destination_does_not_start(tmp_path: Path, audit_dir: str, message: str) -> None:
    plan = write_tiny_plan(tmp_path / "plan.yaml", "audited", (5, 5))
    with plan.open("a") as handle:
        handle.write(f"audit: {{dir: {audit_dir.format(tmp=tmp_path)}}}\n")
    result = loadtest("run", "--plan", str(plan), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = error_lines(result)
    assert len(lines) == 1 and message.format(tmp=tmp_path) in lines[0], lines
    assert "starting etcd" not in result.stdout and not (tmp_path / "out" / "results.json").exists()


def test_the_apiservers_count_is_split_by_origin() -> None:
    step = audited_step(
        AuditRow("k8s-loadtest/pod_churn", "DELETE", "pods", "resource", "", 80, 1.0, 0.01),
        AuditRow("kwok", "DELETE", "pods", "resource", "", 78, 1.0, 0.01),
        AuditRow("k8s-loadtest/fleet", "DELETE", "pods", "resource", "", 2, 0.1, 0.01),
    )
    assert origins(step, "DELETE pods") == "load 80, harness 2, cluster 78 (kwok)"
