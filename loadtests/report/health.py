"""Cluster health in the report: the summary row of a step, its warnings, and its chart over time.

Read from step.health alone (see loadtests/measure/cluster_health.py for how it is sampled); a step recorded
before health was sampled simply has no health section.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtests.analysis import figures
from loadtests.report import charts, page
from loadtests.results import StepResult
from loadtests.results.health import HealthSummary

# A Lease older than this share of its duration has missed renewals (kwok and kubelets renew at a quarter).
LEASE_LAG_WARNING = 0.5


@dataclass
class HealthCell:
    header: str
    value: str
    css: str = ""  # "warn" | "bad" | ""
    title: str = ""  # what the figure is, on hover


def _get(summary: HealthSummary, key: str) -> float | None:
    value = summary.figure(key)
    return float(value) if isinstance(value, int | float) else None


def _flag(value: float | None, bad: bool = True) -> str:
    return ("bad" if bad else "warn") if value else ""


def _pair(*values: float | None) -> str:
    return " · ".join(page.number(v) for v in values)


def _lease_cell(summary: HealthSummary) -> HealthCell:
    lag, duration = _get(summary, "lease_lag_max_s"), _get(summary, "lease_duration_s")
    css = ""
    if lag is not None and duration:
        css = "bad" if lag > duration else "warn" if lag > LEASE_LAG_WARNING * duration else ""
    value = page.duration(lag) + (f" of {duration:g} s" if duration else "")
    return HealthCell("oldest Lease renewal (max)", value, css,
                      "the longest any kwok node's Lease went unrenewed, against the lease duration")


def health_cells(step: StepResult) -> list[HealthCell]:
    """The step's health in one table row: the worst moment of each figure, or its count over the window."""
    s = step.health.summary
    attempts = s.scheduler_attempts
    inflight = s.apiserver_inflight_max
    not_ready, unreachable = _get(s, "nodes_not_ready_max"), _get(s, "nodes_unreachable_max")
    taints = (_get(s, "taint_not_ready_max"), _get(s, "taint_unreachable_max"))
    evicted = _get(s, "pods_evicted")
    slow, leader = _get(s, "etcd_slow_applies"), _get(s, "etcd_leader_changes")
    cpus = s.cpus
    return [
        HealthCell("NotReady nodes (max)", page.number(not_ready), _flag(not_ready)),
        HealthCell("unreachable nodes (max)", page.number(unreachable), _flag(unreachable)),
        HealthCell("taints not-ready · unreachable (max)", _pair(*taints), "warn" if any(taints) else "",
                   "nodes carrying node.kubernetes.io/not-ready and node.kubernetes.io/unreachable"),
        _lease_cell(s),
        HealthCell("pods Pending (max)", page.number(_get(s, "pods_pending_max"))),
        HealthCell("pods not Running (max)", page.number(_get(s, "pods_not_running_max"))),
        HealthCell("pods evicted", page.number(evicted), _flag(evicted, bad=False),
                   f"taint manager deletions {page.number(_get(s, 'evictions_taint_manager'))}, "
                   f"node evictions {page.number(_get(s, 'evictions_node_collector'))}"),
        HealthCell("scheduler queues (max)", page.number(_get(s, "scheduler_pending_pods_max"))),
        HealthCell("scheduled · unschedulable · error", _pair(*(attempts.get(k) for k in
                                                                ("scheduled", "unschedulable", "error"))),
                   _flag(attempts.get("error"), bad=False), "scheduling attempts over the window"),
        HealthCell("work queues depth (max)", page.number(_get(s, "workqueue_depth_max"))),
        HealthCell("work queue wait p99 (max)", _bounded(s, "workqueue_queue_p99_max_s"), "",
                   "the slowest controller-manager queue's wait p99, in its worst interval"),
        HealthCell("in flight mutating · readOnly (max)", _pair(inflight.get("mutating"), inflight.get("readOnly"))),
        HealthCell("APF rejected", page.number(_get(s, "apf_rejected")), _flag(_get(s, "apf_rejected"), bad=False)),
        HealthCell("APF wait p99", _bounded(s, "apf_wait_p99_s"), "", "over the window"),
        HealthCell("etcd slow applies · leader changes", _pair(slow, leader), _flag(slow or leader, bad=False)),
        HealthCell("etcd fsync p99 (max)", _bounded(s, "etcd_wal_fsync_p99_max_s"), "",
                   "etcd WAL fsync p99 in its worst interval"),
        HealthCell("machine CPU avg · max", f"{page.percent(_get(s, 'cpu_machine_avg'), 0)} · "
                   f"{page.percent(_get(s, 'cpu_machine_max'), 0)}", "",
                   f"100 % = one core; {cpus} cores" if cpus else "100 % = one core"),
    ]


def _bounded(s: HealthSummary, key: str) -> str:
    """A p99 figure of the summary, as the bound it is where the histogram gave no more ("< 1.0 ms")."""
    return page.bounded(_get(s, key), s.bounds.get(key, ""))


def health_details(step: StepResult) -> list[str]:
    """The queues behind the row's work-queue figures, one line each."""
    s = step.health.summary
    lines = []
    deepest = s.workqueue_deepest
    if deepest:
        lines.append("deepest work queues: " + ", ".join(f"{k} {page.number(v)}" for k, v in deepest.items()))
    slowest = s.workqueue_slowest_p99_s
    if slowest:
        lines.append("slowest work queues (wait p99 over the window): "
                     + ", ".join(f"{k} {page.duration(v)}" for k, v in slowest.items()))
    return lines


def health_warnings(step: StepResult) -> list[str]:
    """What the health figures show that a reader must not miss."""
    s = step.health.summary
    found = []
    not_ready = _get(s, "nodes_not_ready_max")
    if not_ready:
        found.append(f"{not_ready:.0f} kwok nodes NotReady at the worst moment "
                     f"({_get(s, 'nodes_unreachable_max') or 0:.0f} unreachable)")
    lag, duration = _get(s, "lease_lag_max_s"), _get(s, "lease_duration_s")
    if lag is not None and duration and lag > LEASE_LAG_WARNING * duration:
        found.append(f"a node Lease went {page.duration(lag)} without renewal "
                     f"({lag / duration:.0%} of its {duration:g} s duration)")
    evicted = max(_get(s, "pods_evicted") or 0, _get(s, "evictions_taint_manager") or 0)
    if evicted:
        found.append(f"{evicted:.0f} pods evicted")
    leader = _get(s, "etcd_leader_changes")
    if leader:
        found.append(f"etcd changed leader {leader:.0f} times")
    slow = _get(s, "etcd_slow_applies")
    if slow:
        found.append(f"{slow:.0f} slow etcd applies (likely a slow disk)")
    return found


def health_panel(step: StepResult) -> charts.Panel | None:
    """The step's health over time; None when the step has no samples."""
    health = step.health
    rows = figures.health_rows(step)
    if not health.samples or not rows:
        return None
    every = f"sampled every {page.duration(health.interval_s)}" if health.interval_s else "sampled"
    return charts.Panel(f"chart-health_{step.index}", f"Cluster health through {step.name or 'the step'}",
                        f"{figures.HEALTH_SOURCE}; {every}",
                        charts.health_figure(rows, [s.t_s for s in health.samples]))
