"""The lessons of the newer scale reports at --scale small, in a module of their own so the suite's workers run
them beside the older lessons' (test_lessons.py: the same runner, each lesson once for the module; a copy with
shorter windows where the assertions need no more, each saying why they can still fail)."""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.analysis.scrapes import load_scrape, step_folder
from loadtests.report.lesson import LESSON_PAGE
from tests.integration.lessonrun import Lessons, comparisons, last_step, lesson_summary

STARTED = ["process_start_time_seconds"]  # the family a restart is read from


@pytest.fixture(scope="module")
def lessons(bins: Any, tmp_path_factory: pytest.TempPathFactory) -> Lessons:
    return Lessons(tmp_path_factory.mktemp("newer-lessons"))


def test_large_lists_read_etcd_whole_unless_the_watch_cache_serves_them(lessons: Lessons) -> None:
    # 8 s windows, 1 s warm-ups: one LIST of the prefill reads its 20 MB from etcd, and the pollers ask 2 a second
    # in every variant, so etcd's bytes still tell etcd from the watch cache by orders of magnitude
    folder = lessons.run(lessons.shortened("large-list-memory", {"duration_s": 8, "warmup_s": 1}))
    sent = {c["against"]: c for c in comparisons(folder, "bytes etcd sent to its clients")}
    warned = sent["watch-cache"]["warned"][0]
    assert warned > 20 * 100_000  # at least every prefilled ConfigMap's 100 KB, once
    assert sent["paginated"]["fix"][0] > warned / 2  # paginated from etcd: the same objects read, page by page
    assert sent["watch-cache"]["fix"][0] < warned / 100  # resourceVersion=0: served from memory
    for variant in ("unpaginated-from-etcd", "paginated", "watch-cache"):
        step = last_step(folder, variant)
        assert step.objects.get("configmaps", 0) >= 200, variant  # the prefill stood through the window
        assert next(p for p in step.processes if p.component == "kube-apiserver").rss_max_bytes > 0


def test_leases_leave_the_main_etcd(lessons: Lessons) -> None:
    # 8 s windows, 1 s warm-ups: the keys are read at the window's close, and 20 nodes renewing every 10 s renew
    # about 16 times in 8 s besides the components' leader elections (no renewal in either variant still fails)
    folder = lessons.run(lessons.shortened("leases-etcd", {"duration_s": 8, "warmup_s": 1}))
    shared = last_step(folder, "shared-etcd").etcd.keys_by_prefix
    own = last_step(folder, "leases-etcd").etcd.keys_by_prefix
    assert shared["leases"] >= 20 and own["leases"] == 0  # one per node at least, then none in the main etcd
    assert own["pods"] > 0  # the main etcd still holds everything else
    renewals = comparisons(folder, "Lease renewals per second")[0]
    assert renewals["warned"][0] > 0 and renewals["fix"][0] > 0  # the nodes renewed in both variants


# figures every variant measures, and those only flow control has (none with it off; the noisy tenant's own
# level only with its own FlowSchema)
APF_ALWAYS = ("the quiet tenant's POST pods p99 (server, queueing included)",
              "the quiet tenant's pods created per second (of its churn rate)",
              "the oldest Lease's renewal lag (max over the window)", "nodes NotReady (max over the window)",
              "429s to the noisy tenant per second", "429s to the quiet tenant per second",
              "429s to the kubelets (kwok) per second")
APF_LEVELS = ("flow-control queue wait p99, global-default (both tenants; the quiet one alone with its own FlowSchema)",
              "flow-control queue wait p99, the kubelets' levels",
              "requests rejected by flow control per second, global-default")
APF_OWN_LEVEL = ("flow-control queue wait p99, tenant-noisy's own level",
                 "requests rejected by flow control per second, tenant-noisy's own level")


def test_flow_control_keeps_one_tenants_list_flood_from_the_other_tenant(lessons: Lessons) -> None:
    folder = lessons.run("apf-noisy-neighbour")
    summary = lesson_summary(folder)
    assert summary["variants"] == {name: {"state": "complete", "runs": 1, "aborted": 0, "recorded_nothing": 0}
                                   for name in ("apf-off", "apf-default", "apf-flowschema")}
    found = {(c["measure"], c["against"]): c for c in summary["comparisons"]}
    for fix in ("apf-default", "apf-flowschema"):
        for measure in APF_ALWAYS:
            assert found[(measure, fix)]["warned"] and found[(measure, fix)]["fix"], (measure, fix)
        for measure in APF_LEVELS:  # flow control's own figures: not measured with it off, measured with it on
            assert not found[(measure, fix)]["warned"] and found[(measure, fix)]["fix"], (measure, fix)
        for measure in APF_OWN_LEVEL:
            assert bool(found[(measure, fix)]["fix"]) == (fix == "apf-flowschema"), (measure, fix)
    for variant in ("apf-off", "apf-default", "apf-flowschema"):
        step = last_step(folder, variant)
        tenants = [row for row in step.audit.requests if row.client in ("k8s-loadtest/list_pollers",
                                                                          "k8s-loadtest/pod_churn")]
        assert {row.client for row in tenants} == {"k8s-loadtest/list_pollers", "k8s-loadtest/pod_churn"}
        assert not [row for row in tenants if "403" in row.codes], tenants  # RBAC grants each what its load does
        assert all(slow.user in ("tenant-noisy", "tenant-quiet") for slow in step.audit.slowest
                   if slow.client in ("k8s-loadtest/list_pollers", "k8s-loadtest/pod_churn"))
    # held to one seat of its own level, the noisy tenant is refused there, and the quiet tenant's creates are
    # answered faster than with flow control off
    assert found[("requests rejected by flow control per second, tenant-noisy's own level", "apf-flowschema")][
        "fix"][0] > 0
    quiet = found[("the quiet tenant's POST pods p99 (server, queueing included)", "apf-flowschema")]
    assert quiet["fix"][0] < quiet["warned"][0], quiet


def test_informers_resync_after_their_apiserver_restarts_by_listing_or_by_streaming(lessons: Lessons) -> None:
    folder = lessons.run("relist-storm")
    summary = lesson_summary(folder)
    assert summary["variants"] == {name: {"state": "complete", "runs": 1, "aborted": 0, "recorded_nothing": 0}
                                   for name in ("list-watch", "watch-list")}
    for found in summary["comparisons"]:  # every figure measured in both setups, none absent
        assert found["warned"] and found["fix"], found
    for variant, listed in (("list-watch", True), ("watch-list", False)):
        step = last_step(folder, variant)
        (mark,) = step.restart.marks  # type: ignore[union-attr]
        assert mark.instance == "kube-apiserver" and mark.version == "v1.37.2"
        assert mark.ready_at_s < step.duration_s and mark.peak_rss_bytes and mark.peak_rss_bytes > 50 << 20
        start = load_scrape(step_folder(folder / variant, step.index), "apiserver", "start", families=STARTED)
        end = load_scrape(step_folder(folder / variant, step.index), "apiserver", "end", families=STARTED)
        assert start is not None and end is not None  # the end page is the restarted apiserver's
        assert (end.total("process_start_time_seconds") or 0) > (start.total("process_start_time_seconds") or 0)
        rows = {(row.type, row.name): row for row in step.client}
        synced = rows[("SYNC", "pods informers: cut to synced")]
        assert synced.count == 20 and synced.failures == 0  # every informer back in sync within the window
        assert (synced.content_bytes or 0) > 20 * 200 * 1000  # each received every pod again (about 4 KB each)
        lists = sum(row.count - row.failures for (kind, name), row in rows.items()
                    if kind == "LIST" and "informer" in name)
        assert (lists >= 20) if listed else (lists == 0), (variant, lists)
        assert any(note.startswith("informers after the restart: 20 of 20 in sync again") for note in step.notes)
    served = comparisons(folder, "LISTs of pods the apiserver served")[0]
    assert served["warned"][0] >= 20 > served["fix"][0]  # the informers' LISTs, and none of them when streaming
    page = (folder / LESSON_PAGE).read_text()
    assert "in the report, ×10.00; here (restarted kube-apiserver peak RSS): against watch-list ×" in page
