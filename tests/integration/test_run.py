"""`loadtest run` end to end against a control plane it starts itself: counts agree, faults end cleanly."""

from __future__ import annotations

import bisect
import json
import math
import re
import sqlite3
import subprocess
import tarfile
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtests import results
from loadtests.analysis import profiles
from loadtests.analysis.metrics import Snapshot, labels_of
from loadtests.analysis.server import SLI_LATENCY, server_latencies
from loadtests.analysis.slo import failed_checks
from loadtests.binaries.prometheus import find_prometheus, prometheus_set
from loadtests.config.plan import PLANS_DIR
from loadtests.controlplane.processes import LOOPBACK, free_ports, http_ok, wait_for
from loadtests.errors import EXIT_PASSED, EXIT_SLO_FAILED
from loadtests.index.store import figure_rows
from loadtests.measure.audit import AuditReader
from tests.cli import loadtest, start_loadtest

# apiserver_request_sli_duration_seconds's buckets (Kubernetes's own definition): the resolution a p99 has
SLI_BUCKETS = (0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0,
               45.0, 60.0)
POST_PODS = 'apiserver_request_sli_duration_seconds_bucket{verb="POST", resource="pods", subresource=""}'
POST_PODS_P99 = f'histogram_quantile(0.99, sum by (le) (increase({POST_PODS}[{{{{ .elapsed }}}}])))'


def promql_smoke_plan(folder: Path) -> Path:
    """The smoke plan with a Prometheus, a kube-burner metrics profile for figures and checks (one that cannot
    hold, so its JUnit case fails naming its query)."""
    (folder / "metrics.yml").write_text(yaml.safe_dump([
        {"query": POST_PODS_P99, "metricName": "postPodsP99", "instant": True},
        {"query": "sum(rate(apiserver_request_total[%v]))", "metricName": "requestRate"},
        {"query": 'absent_metric_never_exported{job="etcd"}', "metricName": "absent"}]))
    plan = yaml.safe_load((PLANS_DIR / "smoke.yaml").read_text())
    plan.update(prometheus={"enabled": True, "scrape_interval_s": 2}, figures={"profile": "metrics.yml"},
                checks=[{"name": "every target up", "query": "min(up)", "min": 1},
                        {"name": "no target at all", "query": "count(up)", "max": 0}])
    (folder / "smoke.yaml").write_text(yaml.safe_dump(plan))
    return folder / "smoke.yaml"


NO_PROMETHEUS = "prometheus not provided here (make setup says why): the smoke run went without it"


@pytest.fixture(scope="module")
def smoke(bins, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the smoke plan for the tests below (a file goes to one worker): with a Prometheus and the
    PromQL sections where Prometheus is provided, the plan as it is where it is not."""
    folder = tmp_path_factory.mktemp("smoke-run")
    promql = prometheus_set().is_cached()
    plan = promql_smoke_plan(folder).name if promql else "smoke"
    # a relative --out, as users type it
    # and a relative path for the run index it writes to; the gate on where a PromQL check cannot hold: exit 1
    gate = [] if promql else ["--no-gate"]
    proc = start_loadtest("run", "--out", "smoke", "--plan", plan, *gate, "--index", "index.db", cwd=folder)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == (EXIT_SLO_FAILED if promql else EXIT_PASSED), stdout[-3000:] + stderr[-3000:]
    (folder / "stdout.txt").write_text(stdout)
    return folder / "smoke"


@pytest.mark.skipif(not prometheus_set().is_cached(), reason=NO_PROMETHEUS)
def test_smoke_plan_promql(smoke: Path) -> None:
    check_promql(results.load(smoke), smoke)
    # the run exited 1 (the fixture checks it) for the check that cannot hold, said with its query
    stdout = (smoke.parent / "stdout.txt").read_text()
    assert re.search(r"PromQL check no target at all: \d+ \(needed <= 0\); query: count\(up\)", stdout), stdout
    assert any(line.startswith("FAIL: ") and "PromQL check no target at all at step" in line
               for line in stdout.splitlines()), stdout[-2000:]


def test_smoke_plan_end_to_end(smoke: Path) -> None:
    out = smoke
    run = results.load(out)
    assert run.status == "complete" and [s.nodes for s in run.steps] == [10, 20]
    # every figure of every step in the run index it was given (a SQLite file, a relative path), after the folder
    with closing(sqlite3.connect(out.parent / "index.db")) as index:
        assert index.execute("SELECT run_id, plan_name, status FROM loadtest_runs").fetchall() == [
            (run.run_id, "smoke", "complete")]
        [(figures,)] = index.execute("SELECT count(*) FROM loadtest_figures").fetchall()
    stdout = (out.parent / "stdout.txt").read_text()
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
    # the controller-manager's controllers are told apart, read by the steps' own audit reader over the whole
    # kept log: in the smoke load (bare pods) they act only when nodes register and the fleet scales, just before
    # a window opens (the node controller's events up to its 5 s monitor period later), so whether any falls
    # inside a window depends on how busy the machine is
    audited = {row.client for row in AuditReader(out / "audit" / "audit.log").gather(0.0, math.inf).requests}
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


def _bucket(value: float) -> int:
    return bisect.bisect_left(SLI_BUCKETS, value)


def check_promql(run: results.RunResult, out: Path) -> None:
    """The run's Prometheus: its figures per step, the failing check in JUnit with its query, and, asked again of
    its kept TSDB, the same answers and the PromQL p99 of POST pods equal to the harness's own arithmetic on the
    same counters."""
    for step in run.steps:
        found = {f.name: f for f in step.promql}
        assert found["postPodsP99"].value is not None, found["postPodsP99"]
        assert found["requestRate"].value and found["requestRate"].value > 0
        assert found["absent"].value is None and found["absent"].error.startswith("no series")
        # the part of the window Prometheus's scrapes cover lies inside the harness's, near its edges
        window = step.promql_window
        assert window is not None and window.targets >= 5, window
        # every target scraped within two intervals of each edge (one scrape may come late on a busy machine)
        edge = 2 * window.interval_s
        assert 0 <= window.first_scrape_s <= edge and window.range_s - edge <= window.last_scrape_s <= window.range_s
        # Prometheus is a component of the run: its CPU and memory measured like the others'
        prometheus = [p for p in step.processes if p.component == "prometheus"]
        assert len(prometheus) == 1 and prometheus[0].cpu_percent > 0 and prometheus[0].rss_max_bytes, prometheus
    assert failed_checks(run) == [f"PromQL check no target at all at step {s.name}" for s in run.steps]
    junit = (out / "junit.xml").read_text()
    assert 'type="PromQL check"' in junit and "query: count(up)" in junit
    html = (out / "report.html").read_text()
    assert "The plan&#39;s PromQL figures" in html
    assert all(step.promql_window.said().replace("'", "&#39;") in html for step in run.steps)
    assert not list((out / "prometheus").glob("*.key"))
    with reopened(out) as api:
        for step in run.steps:
            check_p99(step, api)
        last = run.steps[-1]
        answer = api("query", query=last.promql[0].query, time=_epoch(last.promql_window.evaluated_at))
        assert float(answer["result"][0]["value"][1]) == last.promql[0].value


def _epoch(stamp: str) -> str:
    return f"{datetime.fromisoformat(stamp).timestamp():.3f}"


def check_p99(step: results.StepResult, api: Callable[..., Any]) -> None:
    """The PromQL p99 of POST pods against the harness's own p99 arithmetic (analysis/server.server_latencies)
    on Prometheus's own counters at the first and last scrape its query's range holds: the same data, so the same
    figure (the harness's window is wider by up to a scrape at each edge, and under 100 creates a p99 is their
    slowest, which one edge can hold or not: that the covered window lies inside is checked apart)."""
    figure = next(f for f in step.promql if f.name == "postPodsP99")
    at = _epoch(step.promql_window.evaluated_at)
    window = re.search(r"\[(\d+ms)\]", figure.query)
    assert window is not None, figure.query
    raw = api("query", query=f"{POST_PODS}[{window[1]}]", time=at)["result"]
    assert raw, f"no POST pods samples in {window[1]} before {at}"
    opened, closed = (datetime.fromisoformat(step.window[k]).timestamp() for k in ("opened_at", "closed_at"))
    ends: list[Snapshot] = []
    for pick in (0, -1):
        samples = {}
        for series in raw:
            when, value = series["values"][pick]
            assert opened - 0.002 <= float(when) <= closed + 0.002, (opened, when, closed)
            labels = {k: v for k, v in series["metric"].items() if k != "__name__"}
            samples[(SLI_LATENCY + "_bucket", labels_of(labels))] = float(value)
        ends.append(Snapshot(samples))
    own = next(s for s in server_latencies(*ends) if (s.verb, s.resource, s.subresource) == ("POST", "pods", ""))
    harness = next(s for s in step.server if (s.verb, s.resource, s.subresource) == ("POST", "pods", ""))
    assert own.count <= harness.count, (own.count, harness.count)  # the covered window is inside the harness's
    assert _bucket(figure.value) == _bucket(own.p99), (figure.value, own.p99, own.count)
    if "p99" not in own.bounds:  # increase() scales every bucket alike: the interpolation gives the same value
        assert math.isclose(figure.value, own.p99, rel_tol=1e-6), (figure.value, own.p99, own.count)


@contextmanager
def reopened(out: Path) -> Iterator[Callable[..., Any]]:
    """Prometheus's HTTP API (`data` of /api/v1/<path>) on a Prometheus started on the run's kept TSDB."""
    with tarfile.open(out / "prometheus" / "tsdb.tar.gz") as tar:
        tar.extractall(out / "reopened", filter="data")
    port = free_ports(1)[0]
    server = subprocess.Popen([str(find_prometheus().prometheus), f"--storage.tsdb.path={out / 'reopened' / 'data'}",
                               f"--web.listen-address={LOOPBACK}:{port}",
                               f"--config.file={out / 'prometheus' / 'prometheus.yml'}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def api(path: str, **params: str) -> Any:
        url = f"http://{LOOPBACK}:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - loopback
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    try:
        wait_for(lambda: http_ok(f"http://{LOOPBACK}:{port}/-/ready"), 60, "the reopened prometheus ready")
        yield api
    finally:
        server.terminate()
        server.wait(timeout=30)
