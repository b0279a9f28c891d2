"""Cluster health: figures from /metrics recorded on a real v1.37.2 control plane, and from node and Lease lists.

The pages (trimmed to the families the sampler reads) were recorded around one known action: 10 pods created
and run by kwok on a 50-node cluster that already held one pod no node can take.
"""

from __future__ import annotations

import collections
import datetime
import os
import time
from typing import Any

import pytest

from loadtests.analysis.metrics import Snapshot
from loadtests.kube.errors import ApiError
from loadtests.kube.pb import coordination_v1_pb2
from loadtests.kube.watch import ListPage, WatchEvent
from loadtests.measure import cluster_health as health
from loadtests.measure import cluster_objects, component_metrics, processes
from loadtests.measure.probes import StepProbes
from loadtests.results import RunResult, StepResult, from_dict, to_dict
from loadtests.results.health import ClusterHealth, HealthSample, HealthSummary
from tests.checks import recorded
from tests.unit.test_measure_probes import unreachable_target

PODS_CREATED = 10
NOW = 1_800_000_000.0  # a fixed "now" for the lease figures, epoch seconds


def pair(prefix: str) -> tuple[Snapshot, Snapshot]:
    return recorded(f"{prefix}_start.txt"), recorded(f"{prefix}_end.txt")


# ---- /metrics of the real components ----------------------------------------------------------------------


def test_scheduler_queues_and_attempts() -> None:
    start, end = pair("kube-scheduler_v1.37.2")
    used: dict[str, str] = {}
    figures = component_metrics.scheduler_figures(start, end, used)
    assert figures["scheduler_attempts.scheduled"] == PODS_CREATED
    assert figures["scheduler_attempts.error"] == 0 and figures["scheduler_attempts.unschedulable"] == 0
    # the pod no node can take waits in the unschedulable queue; v1.37.2 also has pod-group queues
    assert figures["scheduler_pending_pods.unschedulable"] == 1 and figures["scheduler_pending_pods"] == 1
    assert {"active", "backoff", "gated", "incomplete", "pending"} <= {
        k.split(".", 1)[1] for k in figures if k.startswith("scheduler_pending_pods.")}
    assert used == {"scheduler_pending_pods": "scheduler_pending_pods",
                    "scheduler_attempts": "scheduler_schedule_attempts_total"}


def test_first_scrape_gives_gauges_but_no_increase() -> None:
    _, end = pair("kube-scheduler_v1.37.2")
    figures = component_metrics.scheduler_figures(None, end, {})
    assert figures["scheduler_pending_pods"] == 1
    assert not any(k.startswith("scheduler_attempts.") for k in figures)
    etcd_end = recorded("etcd_v3.6.16_health_end.txt")
    assert component_metrics.etcd_figures(None, etcd_end, {})["etcd_slow_applies"] is None


def test_controller_manager_work_queues() -> None:
    start, end = pair("kube-controller-manager_v1.37.2")
    used: dict[str, str] = {}
    queues = component_metrics.controller_manager_figures(start, end, used)
    assert len(queues.depth) > 40  # one per controller queue
    assert "node_lifecycle_controller" in queues.depth
    assert queues.figures["workqueue_depth"] == sum(queues.depth.values())
    # the pods just created went through the garbage collector's graph
    assert "garbage_collector_graph_changes" in queues.wait_p99
    assert queues.figures["workqueue_queue_p99_max_s"] == max(queues.wait_p99.values())
    assert 0 < queues.figures["workqueue_queue_p99_max_s"] < 1
    assert queues.figures["evictions_node_collector"] == 0 and queues.figures["evictions_taint_manager"] == 0
    assert used["workqueue_queue_p99"] == "workqueue_queue_duration_seconds"
    assert used["evictions_node_collector"] == "node_collector_evictions_total"
    assert used["evictions_taint_manager"] == "taint_eviction_controller_pod_deletions_total"


def test_the_controllers_work_queues_of_a_workload() -> None:
    """Pages recorded around ClusterLoader2's mix at 20 nodes being created until every pod ran
    (tests/unit/data/record_controller_queues.py)."""
    start, end = pair("kube-controller-manager_v1.37.2_workload")
    used: dict[str, str] = {}
    queues = component_metrics.controller_queues(start, end, {"deployment": 3.0}, used)
    named = list(component_metrics.CONTROLLER_QUEUES)
    assert list(queues)[:len(named)] == named  # each named queue, in order, then the busiest others
    for name in named:
        assert queues[name].adds, (name, queues[name])  # the mix gave every one of them work
        assert queues[name].wait_p99_s is not None and queues[name].work_p99_s is not None, name
    assert queues["deployment"].depth_max == 3.0 and queues["job"].depth_max is None  # no sample saw it
    others = [queues[name].adds or 0 for name in list(queues)[len(named):]]
    assert 0 < len(others) <= component_metrics.OTHER_QUEUES and others == sorted(others, reverse=True)
    assert all(queues[name].retries is not None for name in named)  # a queue without a rate limiter has none
    assert used["workqueue_adds"] == "workqueue_adds_total"
    assert used["workqueue_work_p99"] == "workqueue_work_duration_seconds"
    # a p99 inside one bucket is that bucket's bound, and says so
    assert all(bound in ("<", ">") for q in queues.values() for bound in q.bounds.values())


def test_a_page_without_the_adds_counter_has_its_queues_not_measured() -> None:
    start, end = pair("kube-controller-manager_v1.37.2")  # trimmed before the sampler read workqueue_adds
    queues = component_metrics.controller_queues(start, end, {}, {})
    assert list(queues) == list(component_metrics.CONTROLLER_QUEUES)  # no busiest others without the counter
    assert all(q.adds is None and q.retries is None for q in queues.values())


def test_apiserver_inflight_and_priority_and_fairness() -> None:
    start, end = pair("apiserver-health_v1.37.2")
    used: dict[str, str] = {}
    figures = component_metrics.apiserver_figures(start, end, used)
    assert {"apiserver_inflight.mutating", "apiserver_inflight.readOnly"} <= set(figures)
    assert figures["apf_inqueue"] == 0
    # nothing was rejected: the counter has no series yet, which counts as 0 and says so
    assert figures["apf_rejected"] == 0
    assert "no series" in used["apf_rejected"]
    assert figures["apf_wait_p99_s"] is not None and 0 < figures["apf_wait_p99_s"] < 1
    assert used["apf_wait_p99"] == "apiserver_flowcontrol_request_wait_duration_seconds"


def test_etcd_slow_applies_leader_changes_and_disk() -> None:
    start, end = pair("etcd_v3.6.16_health")
    used: dict[str, str] = {}
    figures = component_metrics.etcd_figures(start, end, used)
    assert figures["etcd_slow_applies"] == 0 and figures["etcd_leader_changes"] == 0
    assert 0 < figures["etcd_wal_fsync_p99_s"] < 1 and 0 < figures["etcd_backend_commit_p99_s"] < 1
    assert used["etcd_slow_applies"] == "etcd_server_slow_apply_total"
    assert used["etcd_leader_changes"] == "etcd_server_leader_changes_seen_total"


def test_an_older_metric_name_is_found_and_recorded() -> None:
    def page(value: int) -> Snapshot:
        return Snapshot.parse(f'# TYPE node_collector_evictions_number counter\n'
                              f'node_collector_evictions_number{{zone=""}} {value}\n')

    used: dict[str, str] = {}
    figures = component_metrics.controller_manager_figures(page(1), page(4), used).figures
    assert figures["evictions_node_collector"] == 3
    assert used["evictions_node_collector"] == "node_collector_evictions_number"
    assert "workqueue_depth" not in figures  # not on the page: missing, not zero


# ---- nodes, Leases and pods from the API ------------------------------------------------------------------


def stamp(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def node(name: str, ready: str = "True", taints: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"taints": [{"key": "kwok.x-k8s.io/node", "effect": "NoSchedule"},
                                *({"key": key, "effect": "NoExecute"} for key in taints)]},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": ready}]}}


def lease(name: str, renewed: float, duration: int = 40) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": duration, "renewTime": stamp(renewed)}}


NODES = [node("kwok-node-00000"), node("kwok-node-00001"),
         node("kwok-node-00002", "False", (cluster_objects.TAINT_NOT_READY,)),
         node("kwok-node-00003", "Unknown", (cluster_objects.TAINT_UNREACHABLE,)),
         node("kwok-node-00004", "Unknown", (cluster_objects.TAINT_UNREACHABLE, cluster_objects.TAINT_NOT_READY))]
LEASES = [lease("kwok-node-00000", NOW - 2.5), lease("kwok-node-00001", NOW - 9.75),
          lease("kwok-node-00002", NOW - 30.0), lease("kwok-node-00003", NOW - 41.5),
          lease("kwok-node-00004", NOW - 55.0),
          lease("kwok-node-99999", NOW - 600.0),  # its node was deleted: must not count
          lease("real-node", NOW - 5.0)]  # someone else's node: not ours


def states(items: list[dict[str, Any]], reduce: Any) -> dict[str, Any]:
    return {item["metadata"]["name"]: reduce(item) for item in items}


def test_not_ready_unreachable_and_taints_are_counted() -> None:
    figures = cluster_objects.node_figures(states(NODES, cluster_objects.node_state), None, now=NOW)
    assert figures == {"nodes": 5, "nodes_not_ready": 3, "nodes_unreachable": 2, "taint_not_ready": 2,
                       "taint_unreachable": 2}


def test_lease_lag_is_the_oldest_renewal_of_present_nodes() -> None:
    nodes, leases = states(NODES, cluster_objects.node_state), states(LEASES, cluster_objects.lease_state)
    figures = cluster_objects.node_figures(nodes, leases, now=NOW)
    assert figures["leases"] == 5
    assert figures["lease_lag_s"] == pytest.approx(55.0, abs=1e-3)
    assert figures["leases_expired"] == 2  # 41.5 s and 55 s against 40 s
    healthy = {name: state for name, state in nodes.items() if name in ("kwok-node-00000", "kwok-node-00001")}
    assert cluster_objects.node_figures(healthy, leases, now=NOW)["lease_lag_s"] == pytest.approx(9.75, abs=1e-3)
    assert cluster_objects.node_figures(healthy, {}, now=NOW)["lease_lag_s"] is None


class FakeLeaseApi:
    """Answers LISTs of Leases with the pages given, one per call; a None page fails."""

    def __init__(self, *pages: list[dict[str, Any]] | None) -> None:
        self.pages = list(pages)

    def list_messages(self, resource: str, namespace: str, **query: Any) -> list[Any]:
        assert (resource, namespace, query["resource_version"]) == ("leases", "kube-node-lease", "0")
        items = self.pages.pop(0)
        if items is None:
            raise ApiError(0, "connection refused", "GET", "/leases")
        return items


def test_a_renewal_between_samples_counts_as_lag() -> None:
    """A Lease renewed 12 s after its previous renewal was 12 s old just before, whenever the sample came."""
    name = "kwok-node-00000"
    leases = cluster_objects.LeaseLists(FakeLeaseApi([lease(name, NOW - 13.0)], [lease(name, NOW - 1.0)],
                                            None, [lease(name, NOW - 1.0)]))
    nodes = states([node(name)], cluster_objects.node_state)
    first = leases.refresh()
    assert first is not None and first[1] == {}
    assert cluster_objects.node_figures(nodes, *first, now=NOW)["lease_lag_s"] == pytest.approx(13.0)
    second = leases.refresh()
    assert second is not None and second[1] == {name: pytest.approx(12.0)}
    assert cluster_objects.node_figures(nodes, *second, now=NOW)["lease_lag_s"] == pytest.approx(12.0)
    assert leases.refresh() is None and "1 of 3 failed" in (leases.note() or "")
    unchanged = leases.refresh()
    assert unchanged is not None and unchanged[1] == {}  # not renewed again: its age alone counts
    assert cluster_objects.node_figures(nodes, *unchanged, now=NOW)["lease_lag_s"] == pytest.approx(1.0)


def lease_message(item: dict[str, Any]) -> coordination_v1_pb2.Lease:
    """A Lease's protobuf message, from its JSON form."""
    found = coordination_v1_pb2.Lease()
    found.metadata.name = item["metadata"]["name"]
    found.spec.leaseDurationSeconds = item["spec"]["leaseDurationSeconds"]
    renewed = datetime.datetime.fromisoformat(item["spec"]["renewTime"])
    found.spec.renewTime.seconds = int(renewed.timestamp())
    found.spec.renewTime.nanos = renewed.microsecond * 1000 + 789  # below the JSON form's microseconds
    return found


def test_leases_listed_as_messages_give_the_figures_their_json_gives() -> None:
    """The Leases' LIST is read as protobuf messages, not dicts: the same Leases give the same states and figures
    either way (a Lease without a renewal yet has none)."""
    nodes = states(NODES, cluster_objects.node_state)
    messages = [lease_message(item) for item in LEASES] + [coordination_v1_pb2.Lease(metadata={"name": "new"})]
    as_json = [*LEASES, {"metadata": {"name": "new"}}]
    from_messages = cluster_objects.LeaseLists(FakeLeaseApi(messages)).refresh()
    from_json = cluster_objects.LeaseLists(FakeLeaseApi(as_json)).refresh()
    assert from_messages is not None and from_json is not None
    assert from_messages[0].keys() == from_json[0].keys()
    for name, state in from_json[0].items():
        assert from_messages[0][name].duration_s == state.duration_s
        assert from_messages[0][name].renewed_at == pytest.approx(state.renewed_at, abs=1e-6)
    assert from_messages[0]["new"] == cluster_objects.LeaseState(None, None)
    assert (cluster_objects.node_figures(nodes, *from_messages, now=NOW)
            == cluster_objects.node_figures(nodes, *from_json, now=NOW))


def test_pods_pending_not_running_and_evicted() -> None:
    def pod(uid: str, phase: str, **status: Any) -> dict[str, Any]:
        return {"metadata": {"uid": uid, "name": uid}, "status": {"phase": phase, **status}}

    pods = [pod("a", "Running"), pod("b", "Pending"), pod("c", "Pending"), pod("d", "Succeeded"),
            pod("e", "Running", conditions=[{"type": "DisruptionTarget", "status": "True",
                                             "reason": "DeletionByTaintManager"}]),
            pod("f", "Failed", reason="Evicted")]
    found = {p["metadata"]["uid"]: cluster_objects.pod_state(p) for p in pods}
    assert [uid for uid, state in found.items() if state.evicted] == ["e", "f"]
    tally = collections.Counter(found.values())
    assert cluster_objects.pod_figures(tally, evicted=2) == {"pods": 6, "pods_pending": 2, "pods_not_running": 4,
                                                    "pods_evicted": 2}


class TestTheRunsView:
    """One watch per collection for the whole run: each window reads its own share of it (fed here the pages and
    events the watch would deliver; the HTTP side needs a cluster)."""

    @staticmethod
    def pod(uid: str, phase: str = "Running", **status: Any) -> dict[str, Any]:
        return {"metadata": {"uid": uid, "name": uid}, "status": {"phase": phase, **status}}

    def evicted(self, uid: str) -> dict[str, Any]:
        return self.pod(uid, "Failed", reason="Evicted")

    def test_a_window_counts_evictions_of_its_own_time_and_those_still_there_when_it_opened(self) -> None:
        pods = cluster_objects.ClusterView(unreachable_target({}).access).pods_in("fleet")
        pods._replace(ListPage("1", "", 0, items=[self.pod("a"), self.evicted("old"), self.evicted("gone")]))
        pods._apply(WatchEvent("DELETED", self.evicted("gone"), 1.0))
        opened = time.monotonic()
        present = pods.flagged_now()
        assert present == {"old"}
        # flagged when read (the watch's stamps are monotonic), not when handed on
        pods._apply(WatchEvent("MODIFIED", self.evicted("a"), opened + 0.001))
        pods._apply(WatchEvent("DELETED", self.evicted("a"), opened + 0.002))  # deleted soon after: still counted
        assert pods.flagged(opened, present) == 2  # "old" (there when it opened) and "a"; not "gone"
        assert pods.flagged(time.monotonic() + 1, pods.flagged_now()) == 1  # the next window: "old" alone

    def test_the_tally_follows_every_change_as_the_items_would_count(self) -> None:
        """The sampler reads how many pods are in each state from a tally kept as events come: after any list
        of changes it equals what the items themselves count."""
        pods = cluster_objects.ClusterView(unreachable_target({}).access).pods_in("churn")
        assert pods.tally() is None  # never listed
        pods._replace(ListPage("1", "", 0, items=[self.pod("a", "Pending"), self.pod("b"), self.pod("c")]))
        events = [("ADDED", self.pod("d", "Pending")), ("MODIFIED", self.pod("a")), ("MODIFIED", self.pod("a")),
                  ("DELETED", self.pod("b")), ("DELETED", self.pod("never-seen")), ("MODIFIED", self.evicted("c")),
                  ("BOOKMARK", {"metadata": {"resourceVersion": "9"}})]
        for kind, obj in events:
            pods._apply(WatchEvent(kind, obj, 1.0))
            items = pods.items()
            assert items is not None and pods.tally() == collections.Counter(items.values())
        assert pods.tally() == {cluster_objects.PodState("Running", False): 1,
                                cluster_objects.PodState("Pending", False): 1,
                                cluster_objects.PodState("Failed", True): 1}
        pods._replace(ListPage("2", "", 0, items=[self.pod("z")]))  # a relist starts over
        assert pods.tally() == {cluster_objects.PodState("Running", False): 1}

    def test_listeners_get_every_change_until_they_stop_listening(self) -> None:
        pods = cluster_objects.ClusterView(unreachable_target({}).access).pods_in("churn")
        heard: list[str] = []
        listener = lambda event: heard.append(f"{event.type} {event.object['metadata']['uid']}")  # noqa: E731
        pods.listen(listener)
        pods._apply(WatchEvent("ADDED", self.pod("a", "Pending"), 1.0))
        pods._apply(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "9"}}, 1.5))
        pods._apply(WatchEvent("MODIFIED", self.pod("a"), 2.0))
        pods.unlisten(listener)
        pods._apply(WatchEvent("DELETED", self.pod("a"), 3.0))
        assert heard == ["ADDED a", "MODIFIED a"]
        assert pods.items() is None  # never listed: no state to read, though events came

    def test_a_window_notes_only_the_trouble_of_its_own_time(self) -> None:
        nodes = cluster_objects.ClusterView(unreachable_target({}).access).nodes
        reflector = nodes._watch.reflector
        nodes.synced, reflector.lists, reflector.errors, reflector.last_error = True, 3, 2, "Gone"
        assert nodes.note() == "watch of nodes: 2 relists, 2 errors (last: Gone)"  # the whole run's
        mark = nodes.mark()
        assert nodes.note(mark) is None
        reflector.lists, reflector.errors = 4, 3
        assert nodes.note(mark) == "watch of nodes: 1 relists, 1 errors (last: Gone)"
        first = cluster_objects.ClusterView(unreachable_target({}).access).nodes
        assert first.mark().lists == 1  # marked before its first LIST: that LIST is not a relist


# ---- the sampler and the results ----------------------------------------------------------------------------


def test_an_unreachable_target_is_noted_and_never_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes.CpuMeter, "MIN_INTERVAL_S", 0.0)
    sampler = health.ClusterHealthSampler(unreachable_target({"harness": [os.getpid()]}), interval_s=0.1)
    sampler.start()
    result = sampler.gather()
    assert len(result.samples) >= 2 and result.summary.samples == len(result.samples)
    notes = "\n".join(result.notes)
    for what in ("kube-scheduler /metrics: not reachable", "kube-controller-manager /metrics: not reachable",
                 "etcd /metrics: not reachable", "kube-apiserver /metrics:", "watch of nodes: never listed"):
        assert what in notes
    assert result.summary.nodes_not_ready_max is None and result.summary.scheduler_pending_pods_max is None
    last = result.samples[-1].values
    assert "nodes" not in last and last["cpu.harness"] is not None  # missing, while the rest is measured
    assert sampler.gather() is result
    sampler.stop()


def test_health_round_trips_and_old_files_load() -> None:
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=1, started_at="", duration_s=1.0,
                      health=ClusterHealth(interval_s=5.0, samples=[HealthSample(0.1, {"nodes": 1, "x": None})],
                                           summary=HealthSummary(lease_lag_max_s=10.3, scheduler_attempts={"error": 0}),
                                           metrics_used={"workqueue_depth": "workqueue_depth"}, notes=["n"]))
    run = RunResult(run_id="r", plan={}, environment={}, steps=[step])
    assert from_dict(to_dict(run)) == run
    old = to_dict(run)
    del old["steps"][0]["health"]
    assert from_dict(old).steps[0].health == ClusterHealth()


def test_step_probes_gather_health_into_the_step() -> None:
    probes = StepProbes(unreachable_target({}), "probe-ns", "churn-ns", health_interval_s=0.1)
    probes.start()
    step = probes.gather(StepResult(index=0, name="unit", nodes=1, pods_per_node=1, started_at="", duration_s=1.0))
    assert len(step.health.samples) >= 2 and step.health.interval_s == 0.1
    assert any(note.startswith("watch of pods in churn-ns") for note in step.health.notes)
    assert not any("cluster health" in note for note in step.notes)  # its trouble stays in its own notes
    # its own requests are taken off the apiserver's counts, as the other probes' are
    assert probes.probe_requests.get(("LIST", "leases"), 0) >= 1
    probes.stop()


def test_a_p99_that_is_only_a_bound_says_so() -> None:
    def page(fast: int) -> Snapshot:
        return Snapshot.parse("# TYPE etcd_disk_wal_fsync_duration_seconds histogram\n"
                              f'etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.001"}} {fast}\n'
                              f'etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.002"}} {fast}\n'
                              f'etcd_disk_wal_fsync_duration_seconds_bucket{{le="+Inf"}} {fast}\n')

    bounds: dict[str, str] = {}
    figures = component_metrics.etcd_figures(page(10), page(300), {}, bounds)
    assert figures["etcd_wal_fsync_p99_s"] == pytest.approx(0.001)  # not the interpolated 990 µs
    assert bounds == {"etcd_wal_fsync_p99_s": "<"}
    assert component_metrics.etcd_figures(page(10), page(10), {}, bounds)["etcd_wal_fsync_p99_s"] is None


def test_the_maximum_of_sampled_bounds_is_a_bound_only_where_every_top_sample_is() -> None:
    from loadtests.measure.cluster_health import _maximum_bound
    from loadtests.results.health import HealthSample

    key = "etcd_wal_fsync_p99_s"
    bounded = [HealthSample(5, {key: 0.001}, {key: "<"}), HealthSample(10, {key: 0.0005})]
    assert _maximum_bound(bounded, key) == "<"
    assert _maximum_bound([*bounded, HealthSample(15, {key: 0.001})], key) == ""  # the same height, measured
    assert _maximum_bound([*bounded, HealthSample(15, {key: 0.004})], key) == ""
    assert _maximum_bound([HealthSample(5, {key: None})], key) == ""


def test_the_report_has_a_row_per_work_queue_with_its_bounds_and_what_was_not_measured(tmp_path) -> None:
    from loadtests.report.html import write_report
    from tests.unit.reportdata import SAMPLE, edited_run

    def edit(data: dict) -> None:
        step = data["steps"][0]
        step["duration_s"] = 20.0
        step.setdefault("health", {}).setdefault("summary", {})["workqueues"] = {
            "deployment": {"adds": 40, "retries": 2, "depth_max": 5, "wait_p99_s": 0.005, "work_p99_s": 0.02,
                           "bounds": {"wait_p99_s": "<"}},
            "job": {}}

    html = write_report(edited_run(SAMPLE, tmp_path / "run", edit)).read_text(encoding="utf-8")
    assert html.count("<h3>Controller work queues</h3>") == 1  # only the step that has them
    row = html[html.index("<td>deployment</td>"):].split("</tr>")[0]
    assert ">40<" in row and ">2.0<" in row and "&lt; 5.0 ms" in row and "20.0 ms" in row  # 40 items in 20 s
    job = html[html.index("<td>job</td>"):].split("</tr>")[0]
    assert job.count("—") == 6  # nothing of it measured, and none of it shown as 0
