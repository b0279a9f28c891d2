"""The lessons of the newer scale reports at --scale small, in a module of their own so the suite's workers run
them beside the older lessons' (test_lessons.py: the same runner, each lesson once for the module)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.lessonrun import Lessons, comparisons, last_step


@pytest.fixture(scope="module")
def lessons(bins: Any, tmp_path_factory: pytest.TempPathFactory) -> Lessons:
    return Lessons(tmp_path_factory.mktemp("newer-lessons"))


def test_large_lists_read_etcd_whole_unless_the_watch_cache_serves_them(lessons: Lessons) -> None:
    folder = lessons.run("large-list-memory")
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
    folder = lessons.run("leases-etcd")
    shared = last_step(folder, "shared-etcd").etcd.keys_by_prefix
    own = last_step(folder, "leases-etcd").etcd.keys_by_prefix
    assert shared["leases"] >= 20 and own["leases"] == 0  # one per node at least, then none in the main etcd
    assert own["pods"] > 0  # the main etcd still holds everything else
    renewals = comparisons(folder, "Lease renewals per second")[0]
    assert renewals["warned"][0] > 0 and renewals["fix"][0] > 0  # the nodes renewed in both variants
