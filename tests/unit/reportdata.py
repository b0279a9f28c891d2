"""Recorded results for report tests: copies of the fixtures in data/, and variants made from them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.recorded import scale_latencies  # the edit the tests and the benchmarks share

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "results_sample"  # complete run: 100, 500, 1000 nodes
ABORTED = DATA / "results_aborted"  # aborted during its second step, one step recorded
ROLLING = DATA / "results_rolling"  # `rehearse --rolling` v1.36.3 -> v1.37.2 at 5 nodes: 4 instances replaced


def copy_run(source: Path, folder: Path) -> Path:
    """A run folder holding only a copy of `source`'s results.json, as on another machine."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "results.json", folder / "results.json")
    return folder


def edited_run(source: Path, folder: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of `source` with its JSON changed by `edit` (in place)."""
    data = json.loads((source / "results.json").read_text())
    edit(data)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(data, indent=1))
    return folder


def repeated_run(folder: Path, factors: tuple[float, ...],
                 edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """The folder of a repeated run as `loadtest run --repeat N` writes it: repeat-1/, repeat-2/, ... each a
    copy of the sample with every latency multiplied by its factor (and changed by `edit`, when given)."""
    for k, factor in enumerate(factors, start=1):
        def repeat(data: dict[str, Any], k: int = k, factor: float = factor) -> None:
            scale_latencies(factor)(data)
            data["run_id"] = f"{data['run_id']}-repeat-{k}"
            if edit is not None:
                edit(data)

        edited_run(SAMPLE, folder / f"repeat-{k}", repeat)
    (folder / "report.html").write_text("<html></html>")  # the folder's own report files are not runs
    return folder


def with_health(not_ready_at: int | None = None) -> Callable[[dict[str, Any]], None]:
    """An edit giving every step a recorded health time series (every 5 s over 60 s); the step with index
    `not_ready_at` loses 3 nodes for 20 s, their Leases going unrenewed past the lease duration."""

    def edit(data: dict[str, Any]) -> None:
        for step in data["steps"]:
            bad = step["index"] == not_ready_at
            samples = []
            for i in range(13):
                t = 5.0 * i
                down = bad and 20 <= t <= 40
                values = {
                    "nodes": step["nodes"], "nodes_not_ready": 3 if down else 0, "nodes_unreachable": 3 if down else 0,
                    "taint_not_ready": 0, "taint_unreachable": 3 if down else 0,
                    "leases": step["nodes"], "lease_lag_s": 45.0 + t - 20 if down else 10.2 + 0.01 * i,
                    "pods": step["nodes"] * 10, "pods_pending": i % 3, "pods_not_running": i % 3 + 1,
                    "pods_evicted": 0, "scheduler_pending_pods": i % 2, "scheduler_pending_pods.active": i % 2,
                    "apiserver_inflight.mutating": 3 + i % 4, "apiserver_inflight.readOnly": 5 + i % 3,
                    "apf_inqueue": 0, "workqueue_depth": 2 * (i % 3), "workqueue_depth_max": i % 3,
                    "cpu.machine": 120.0 + i, "cpu.iowait": 1.0, "cpu.kube-apiserver": 55.0, "cpu.etcd": 12.0,
                }
                if i:  # the first sample opens the intervals: no increase or p99 yet
                    values.update({"scheduler_attempts.scheduled": 25.0, "scheduler_attempts.unschedulable": 0.0,
                                   "scheduler_attempts.error": 0.0, "apf_rejected": 0.0, "apf_wait_p99_s": 0.004,
                                   "workqueue_queue_p99_max_s": 0.02, "etcd_slow_applies": 0.0,
                                   "etcd_leader_changes": 0.0, "etcd_wal_fsync_p99_s": 0.003,
                                   "etcd_backend_commit_p99_s": 0.006})
                samples.append({"t_s": t, "values": values})
            step["health"] = {
                "interval_s": 5.0,
                "samples": samples,
                "summary": {
                    "samples": len(samples), "nodes_max": step["nodes"], "nodes_not_ready_max": 3 if bad else 0,
                    "nodes_unreachable_max": 3 if bad else 0, "taint_not_ready_max": 0,
                    "taint_unreachable_max": 3 if bad else 0, "lease_lag_max_s": 65.0 if bad else 10.32,
                    "lease_duration_s": 40.0, "leases_expired_max": 3 if bad else 0, "pods_pending_max": 2,
                    "pods_not_running_max": 3, "pods_evicted": 0, "scheduler_pending_pods_max": 1,
                    "scheduler_attempts": {"scheduled": 300.0, "unschedulable": 0.0, "error": 0.0},
                    "workqueue_depth_max": 4, "workqueue_queue_p99_max_s": 0.02,
                    "workqueue_deepest": {"garbage_collector_graph_changes": 2},
                    "workqueue_slowest_p99_s": {"replicaset": 0.012, "garbage_collector_graph_changes": 0.004},
                    "apiserver_inflight_max": {"mutating": 6, "readOnly": 7}, "apf_inqueue_max": 0,
                    "apf_rejected": 0.0, "apf_wait_p99_s": 0.004, "apf_wait_p99_max_s": 0.004,
                    "evictions_node_collector": 0.0, "evictions_taint_manager": 0.0, "etcd_slow_applies": 0.0,
                    "etcd_leader_changes": 0.0, "etcd_wal_fsync_p99_max_s": 0.003,
                    "etcd_backend_commit_p99_max_s": 0.006, "cpu_machine_avg": 126.0, "cpu_machine_max": 132.0,
                    "cpus": 8,
                },
                "metrics_used": {"scheduler_pending_pods": "scheduler_pending_pods",
                                 "workqueue_depth": "workqueue_depth"},
                "notes": [],
            }

    return edit


def with_audit(data: dict[str, Any]) -> None:
    """An edit giving every step an audit summary: the list pollers behind most cluster-wide pod LISTs."""
    for step in data["steps"]:
        step["audit"] = {
            "source": "apiserver audit log (audit.log, Metadata level)", "events": 1500, "unreadable": 0,
            "requests": [
                {"client": "kwok", "verb": "PUT", "resource": "leases", "scope": "resource",
                 "group": "coordination.k8s.io", "count": 1000, "apiserver_s": 4.0, "p99_s": 0.01,
                 "codes": {"200": 1000}},
                {"client": "k8s-loadtest/list_pollers", "verb": "LIST", "resource": "pods", "scope": "cluster",
                 "group": "", "count": 60, "apiserver_s": 30.0, "p99_s": 1.2, "codes": {"200": 59, "429": 1}},
                {"client": "kube-controller-manager (replicaset-controller)", "verb": "LIST", "resource": "pods",
                 "scope": "cluster", "group": "", "count": 5, "apiserver_s": 0.2, "p99_s": 0.05,
                 "codes": {"200": 5}},
                {"client": "k8s-loadtest/pod_churn", "verb": "POST", "resource": "pods", "scope": "resource",
                 "group": "", "count": 435, "apiserver_s": 2.0, "p99_s": 0.02, "codes": {"201": 435}},
            ],
            "slowest": [{"client": "k8s-loadtest/list_pollers", "verb": "LIST", "resource": "pods",
                         "namespace": "", "name": "", "latency_s": 2.5, "code": "200", "at_s": 12.0,
                         "user": "admin"}],
            "notes": [],
        }
        step["window"] = {"opened_at": "2026-11-30T12:00:00.000+00:00", "closed_at": "2026-11-30T12:01:00.000+00:00"}


PROMQL_FIGURE = "POST pods p99 (PromQL)"
PROMQL_FIGURE_QUERY = ('histogram_quantile(0.99, sum by (le) (increase(apiserver_request_sli_duration_seconds_bucket'
                       '{verb="POST", resource="pods"}[%v])))')
PROMQL_CHECK = "no 5xx"
PROMQL_CHECK_QUERY = 'sum(increase(apiserver_request_total{code=~"5.."}[%v]))'


def with_promql(figure_s: float, errors: float) -> Callable[[dict[str, Any]], None]:
    """An edit giving the plan a Prometheus, a PromQL figure in seconds compared by the latency rule and a check
    (no 5xx, max 0), and every step their answers as the run records them: the figure `figure_s` × the step's
    position (1, 2, 3), the check's value `errors`."""

    def edit(data: dict[str, Any]) -> None:
        data["plan"].update(prometheus={"enabled": True, "scrape_interval_s": 5.0},
                            figures=[{"name": PROMQL_FIGURE, "query": PROMQL_FIGURE_QUERY, "unit": "s",
                                      "rule": "latency"}],
                            checks=[{"name": PROMQL_CHECK, "query": PROMQL_CHECK_QUERY, "max": 0}])
        for position, step in enumerate(data["steps"], 1):
            sent = {query: query.replace("%v", "60000ms") for query in (PROMQL_FIGURE_QUERY, PROMQL_CHECK_QUERY)}
            step["promql"] = [
                {"name": PROMQL_FIGURE, "kind": "figure", "query": sent[PROMQL_FIGURE_QUERY],
                 "value": figure_s * position, "series": 1, "error": ""},
                {"name": PROMQL_CHECK, "kind": "check", "query": sent[PROMQL_CHECK_QUERY], "value": errors,
                 "series": 1, "error": ""}]
            step["promql_window"] = {"evaluated_at": "2026-11-30T12:01:00.000+00:00", "range_s": 60.0,
                                     "interval_s": 5.0, "targets": 6, "first_scrape_s": 2.1, "last_scrape_s": 58.3,
                                     "waited_s": 0.4}

    return edit
