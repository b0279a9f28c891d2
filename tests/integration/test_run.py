"""`loadtest run` end to end against a control plane it starts itself: counts agree, faults end cleanly."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from loadtests import results
from loadtests.analysis import profiles
from loadtests.index.store import figure_rows
from tests.cli import loadtest, start_loadtest


def test_smoke_plan_end_to_end(bins, tmp_path: Path) -> None:
    out = tmp_path / "smoke"
    # a relative --out, as users type it
    proc = start_loadtest("run", "--out", "smoke", "--plan", "smoke", "--no-gate", "--index", "index.db", cwd=tmp_path)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    run = results.load(out)
    assert run.status == "complete" and [s.nodes for s in run.steps] == [10, 20]
    # every figure of every step in the run index it was given (a SQLite file, a relative path), after the folder
    with closing(sqlite3.connect(tmp_path / "index.db")) as index:
        assert index.execute("SELECT run_id, plan_name, status FROM loadtest_runs").fetchall() == [
            (run.run_id, "smoke", "complete")]
        [(figures,)] = index.execute("SELECT count(*) FROM loadtest_figures").fetchall()
    assert figures == len(figure_rows("", run)) > 50 and f"index: run {run.run_id} ({out}): indexed 2 step(s)" in stdout
    # who its clients were to flow control, asked once at the start (identities production, the default): the
    # harness the admin, exempt; the load an ordinary user; kwok and joining nodes as the kubelets
    assert [(c.client, c.flow_schema, c.priority_level, c.exempt) for c in run.clients] == [
        ("harness", "exempt", "exempt", True), ("load", "global-default", "global-default", False),
        ("nodes joining", "system-nodes", "system", False)], run.clients
    assert (out / "report.html").stat().st_size > 100_000 and (out / "junit.xml").exists()
    html = (out / "report.html").read_text()
    assert "Who is expensive" in html
    # per step the top functions of both CPU profiles and both heaps; the groups step by step
    assert html.count('class="profile-functions"') == 4 * len(run.steps) and 'id="profile-changes"' in html
    assert (out / "audit" / "audit.log").stat().st_size > 0
    for step in run.steps:
        client_creates = sum(c.count for c in step.client if c.name == "POST pods")
        server_creates = step.server_requests["POST pods"]
        assert client_creates > 20, step.client
        assert abs(client_creates - server_creates) <= 0.05 * client_creates, (client_creates, server_creates)
        assert step.pod_startup.count > 0 and step.pod_startup.p99 is not None
        assert step.watch_delay.count > 0
        assert step.etcd.db_size_bytes and step.etcd.db_size_bytes > 0
        # the window closes before the load stops: its stop (cut watches, clean-up) shows up as no error
        assert not [code for code in step.requests_by_code if code.startswith("5")], step.requests_by_code
        # objects counted when the window closed, exact at that moment
        # (the churn's pods still live then: the load stops only after the window closed)
        assert step.objects["nodes"] == step.nodes and step.objects["pods"] > step.nodes * step.pods_per_node
        assert step.objects["namespaces"] >= 3
        assert any(s.verb == "POST" and s.resource == "pods" and s.p99 for s in step.server)
        components = {p.component for p in step.processes}
        assert {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok",
                "loadgen"} <= components
        # cluster health, sampled every 5 s through the 20 s window
        health = step.health
        summary = health.summary
        assert len(health.samples) > 1 and summary.samples == len(health.samples), health
        assert summary.nodes_max == step.nodes and summary.nodes_not_ready_max == 0, summary
        assert summary.taint_not_ready_max == 0 and summary.taint_unreachable_max == 0, summary
        # kwok renews each Lease every 10 s; measured at most 10.42 s here (smoke and idle, 10 to 50 nodes):
        # 2 s more than the interval means a renewal came late, well before the 40 s lease duration
        assert summary.lease_lag_max_s is not None and summary.lease_lag_max_s < 12.0, summary
        assert summary.lease_duration_s == 40
        assert summary.scheduler_pending_pods_max is not None and summary.scheduler_attempts["scheduled"] > 0
        assert summary.workqueue_depth_max is not None and summary.workqueue_queue_p99_max_s is not None
        assert health.metrics_used["scheduler_pending_pods"] == "scheduler_pending_pods"
        assert health.metrics_used["workqueue_depth"] == "workqueue_depth"
        assert health.notes == [], health.notes
        # who sent what, from the apiserver's audit log over the same window
        assert step.window["opened_at"] < step.window["closed_at"]
        rows = step.audit.requests
        clients = {row.client for row in rows}
        assert {"k8s-loadtest/pod_churn", "kwok", "kube-scheduler", "k8s-loadtest/list_pollers"} <= clients, clients
        audited_creates = sum(r.count for r in rows if r.client == "k8s-loadtest/pod_churn"
                              and r.verb == "POST" and r.resource == "pods")
        assert abs(audited_creates - client_creates) <= 0.05 * client_creates, (audited_creates, client_creates)
        assert step.audit.unreadable == 0 and step.audit.notes == []
        # flow control per priority level and, within each, per flow schema; the load and kwok are system:masters
        # here (identities admin): exempt, with the admin's requests
        levels = {level.priority_level: level for level in step.flow_control}
        assert "exempt" in {s.flow_schema for s in levels["exempt"].flow_schemas}, levels["exempt"]
        for level in levels.values():
            assert sum(s.dispatched or 0 for s in level.flow_schemas) == level.dispatched, level
        # where the CPU went: each component's pprof profile of the window, kept as served and read back
        assert not [note for note in step.notes if note.startswith("not profiled")], step.notes
        for component in ("kube-apiserver", "etcd"):
            cpu = profiles.find(step.profiles, component, "cpu")
            assert cpu is not None and cpu.seconds == 20 and cpu.total and cpu.functions and cpu.groups, cpu
            kept = profiles.decode((out / cpu.files[0]).read_bytes())
            assert kept.total(kept.index_of(profiles.CPU_TYPES)) == cpu.total
            assert profiles.find(step.profiles, component, "heap") is not None
    # the controller-manager's controllers are told apart (each acts in some step, not necessarily in every one)
    audited = {row.client for step in run.steps for row in step.audit.requests}
    assert any(c.startswith("kube-controller-manager (") for c in audited), audited
    # the kept /metrics pages give back every server-side figure
    recorded = {step.index: (step.server, step.requests_by_code, step.etcd) for step in run.steps}
    rebuilt = loadtest("report", "--recompute", str(out))
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    for step in results.load(out).steps:
        assert (step.server, step.requests_by_code, step.etcd) == recorded[step.index]
    # nothing secret lands in the results folder
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".html", ".xml", ".csv", ".log"):
            text = path.read_text(errors="replace")
            assert "PRIVATE KEY" not in text, path
