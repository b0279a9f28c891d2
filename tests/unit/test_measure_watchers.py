"""The bookkeeping of the watch probes, fed the events a watch would deliver (the HTTP side needs a cluster)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from loadtests.kube.access import ClusterAccess
from loadtests.kube.watch import WatchEvent
from loadtests.measure.cluster_objects import ClusterView
from loadtests.measure.watchers import PodStartupProbe, WatchDelayProbe, pod_running_ready

ACCESS = ClusterAccess(server="https://127.0.0.1:1", kubeconfig="/nonexistent")  # never contacted here


def pod(uid: str, phase: str = "Pending", ready: bool = False, version: str = "1") -> dict[str, Any]:
    conditions = [{"type": "PodScheduled", "status": "True"}]
    if phase == "Running":
        conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    return {"metadata": {"uid": uid, "name": f"pod-{uid}", "resourceVersion": version},
            "status": {"phase": phase, "conditions": conditions}}


def test_running_and_ready_are_both_required() -> None:
    assert pod_running_ready(pod("a", "Running", ready=True))
    assert not pod_running_ready(pod("a", "Running", ready=False))
    assert not pod_running_ready(pod("a", "Pending"))
    assert not pod_running_ready({"metadata": {}})


class TestPodStartup:
    def test_latency_is_from_added_to_the_first_running_ready_event(self) -> None:
        probe = PodStartupProbe(ClusterView(ACCESS).pods_in("churn"))
        probe.handle_event("ADDED", pod("a"), 10.0)
        probe.handle_event("MODIFIED", pod("a", "Running", ready=False), 10.5)
        probe.handle_event("MODIFIED", pod("a", "Running", ready=True), 12.25)
        probe.handle_event("MODIFIED", pod("a", "Running", ready=True), 30.0)  # later updates change nothing
        probe.handle_event("ADDED", pod("b"), 11.0)
        probe.handle_event("MODIFIED", pod("b", "Running", ready=True), 11.5)
        assert sorted(probe.samples()) == [pytest.approx(0.5), pytest.approx(2.25)]
        assert probe.gather() is None  # the view's watch never listed: not measured
        probe.pods.synced = True  # as its first LIST would
        result = probe.gather()  # never started: stopping is still safe
        assert result is not None and result.count == 2
        assert result.max == pytest.approx(2.25)
        assert result.source == PodStartupProbe.SOURCE
        probe.stop()

    def test_pods_not_created_while_watched_are_ignored(self) -> None:
        probe = PodStartupProbe(ClusterView(ACCESS).pods_in("churn"))
        probe.handle_event("MODIFIED", pod("old", "Running", ready=True), 5.0)  # existed before start()
        probe.handle_event("ADDED", pod("gone"), 6.0)
        probe.handle_event("DELETED", pod("gone", "Running", ready=True), 7.0)  # deleted: not a start-up
        assert probe.samples() == []
        assert probe.not_running == 1

    def test_a_pod_added_already_running_counts_zero(self) -> None:
        probe = PodStartupProbe(ClusterView(ACCESS).pods_in("churn"))
        probe.handle_event("ADDED", pod("c", "Running", ready=True), 3.0)
        assert probe.samples() == [0.0]


class TestWatchDelay:
    def cm(self, value: str) -> dict[str, Any]:
        return {"metadata": {"name": "watch-delay-probe", "annotations": {WatchDelayProbe.ANNOTATION: value}}}

    def test_delay_per_sequence_number_first_arrival_only(self) -> None:
        probe = WatchDelayProbe(ACCESS, "probe", interval_s=0.5)
        probe.mark_sent(1, at=100.0)
        probe.mark_sent(2, at=100.5)
        probe.mark_sent(3, at=101.0)
        probe.handle_event("MODIFIED", self.cm(f"{probe.token}:1"), 100.02)
        probe.handle_event("MODIFIED", self.cm(f"{probe.token}:1"), 109.0)  # a repeat is not a new arrival
        probe.handle_event("MODIFIED", self.cm(f"{probe.token}:2"), 100.75)
        assert sorted(probe.delays()) == [pytest.approx(0.02), pytest.approx(0.25)]
        assert probe.lost == 1

    def test_other_writers_and_unsent_numbers_are_ignored(self) -> None:
        probe = WatchDelayProbe(ACCESS, "probe")
        probe.mark_sent(1, at=1.0)
        probe.handle_event("MODIFIED", self.cm("someone-else:1"), 1.1)
        probe.handle_event("MODIFIED", self.cm(f"{probe.token}:7"), 1.1)
        probe.handle_event("MODIFIED", self.cm(f"{probe.token}:x"), 1.1)
        probe.handle_event("ADDED", {"metadata": {"name": "watch-delay-probe"}}, 1.1)
        assert probe.delays() == []

    def test_two_probes_do_not_share_a_token(self) -> None:
        assert WatchDelayProbe(ACCESS, "probe").token != WatchDelayProbe(ACCESS, "probe").token


def test_events_reach_the_probe_from_the_shared_watch_loop() -> None:
    probe = PodStartupProbe(ClusterView(ACCESS).pods_in("churn"))
    probe.on_event(WatchEvent("ADDED", pod("a"), 1.0))
    probe.on_event(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "9"}}, 1.5))
    probe.on_event(WatchEvent("MODIFIED", pod("a", "Running", ready=True), 2.0))
    assert probe.samples() == [pytest.approx(1.0)]


def test_stop_before_start_is_safe_twice_and_sends_nothing() -> None:
    probe = WatchDelayProbe(ACCESS, "probe")
    probe.stop()
    probe.stop()
    assert probe.requests() == {}
    assert probe.watch.watches == 0 and probe.lost == 0


def test_a_window_of_hours_keeps_eight_bytes_per_delay() -> None:
    """Two writes a second over a soak: an ended sample keeps its duration alone, its key is forgotten."""
    probe = WatchDelayProbe(ACCESS, "probe")
    tracemalloc.start()
    try:
        probe.mark_sent(0, at=0.0)
        probe.handle_event("MODIFIED", {"metadata": {"annotations": {probe.ANNOTATION: f"{probe.token}:0"}}}, 0.01)
        before = tracemalloc.get_traced_memory()[0]
        for seq in range(1, 20_001):
            probe.begin(seq, seq * 0.5)
            probe.end(seq, seq * 0.5 + 0.004)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 12 * 20_000, grown  # both moments of each, kept by key: about 150 bytes a write
    assert probe.lost == 0 and len(probe.delays()) == 20_001
    probe.end(5, 99.0)  # a repeat of an ended write changes nothing
    assert len(probe.delays()) == 20_001 and probe.delays()[5] == pytest.approx(0.004)
