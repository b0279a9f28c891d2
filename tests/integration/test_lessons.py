"""Every lesson at --scale small, in one `loadtest lesson all` (each variant on its own fresh control plane):
the lesson pages are written, and where the effect is robust at that size, its direction is asserted."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from loadtests import lesson as lesson_mod
from loadtests import results
from loadtests.controlplane.local import MEMORY_ROOT, clusters_root
from loadtests.report.lesson import LESSON_PAGE, LESSON_RESULTS
from tests.cli import start_loadtest


@pytest.fixture(scope="module")
def lessons_run(bins: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, int]]:
    out = tmp_path_factory.mktemp("lessons") / "all"
    proc = start_loadtest("lesson", "all", "--scale", "small", "--out", str(out))
    try:
        stdout, stderr = proc.communicate(timeout=2400)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stdout[-4000:] + stderr[-4000:]
    yield out, stdout, proc.pid


def _summary(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / name / LESSON_RESULTS).read_text())


def _comparisons(out: Path, name: str, measure: str) -> list[dict[str, Any]]:
    return [c for c in _summary(out, name)["comparisons"] if c["measure"] == measure]


def _last_step(out: Path, lesson: str, variant: str) -> results.StepResult:
    run = results.load(out / lesson / variant)
    assert run.status == "complete", run.error
    return run.steps[-1]


def test_every_lesson_wrote_its_page_and_nothing_is_left(lessons_run: tuple[Path, str, int]) -> None:
    out, stdout, pid = lessons_run
    for name in lesson_mod.names():
        assert (out / name / LESSON_PAGE).is_file()
        summary = _summary(out, name)
        assert summary["verdict"] in ("reproduced", "not reproduced", "inconclusive"), (name, summary)
        assert f"lesson {name}: {summary['verdict']}" in stdout
    assert "lessons:" in stdout  # the closing table, one line per lesson
    # every variant's control plane is gone: no cluster folder of this command, no etcd data left in memory
    assert [p for p in clusters_root().glob(f"run-*-{pid}") if p.exists()] == []
    assert list(MEMORY_ROOT.glob(f"k8s-loadtest-run-*-{pid}")) == []
    strays = [p.info["pid"] for p in psutil.process_iter(["pid", "cmdline"])
              if any(str(out) in part for part in (p.info["cmdline"] or []))]
    assert strays == []


def test_endpoints_send_more_bytes_than_endpointslices(lessons_run: tuple[Path, str, int]) -> None:
    out = lessons_run[0]
    sent = _comparisons(out, "endpoints-fanout", "bytes the apiserver sent to watchers of the Service's endpoints")[0]
    assert sent["warned"][0] > sent["fix"][0] > 0
    for variant in ("endpoints", "endpointslices"):  # the Service's pods had IPs, so its endpoints had addresses
        step = _last_step(out, "endpoints-fanout", variant)
        assert step.objects.get("pods", 0) > 0


def test_lists_without_resource_version_reach_etcd_only_without_the_watch_cache(
        lessons_run: tuple[Path, str, int]) -> None:
    out = lessons_run[0]
    fetched = {c["against"]: c for c in _comparisons(out, "list-agents",
                                                       "pods the apiserver read from etcd for LISTs")}
    warned = fetched["watch-cache"]["warned"][0]
    assert warned > 0
    for fix in ("consistent-from-cache", "watch-cache", "informer"):
        assert fetched[fix]["fix"][0] < warned / 5, fix  # served from the watch cache: a fraction of the reads


def test_events_leave_the_main_etcd(lessons_run: tuple[Path, str, int]) -> None:
    out = lessons_run[0]
    shared = _last_step(out, "events-etcd", "shared-etcd").etcd.keys_by_prefix
    own = _last_step(out, "events-etcd", "events-etcd").etcd.keys_by_prefix
    assert shared["events"] > 0 and own["events"] == 0
    assert own["pods"] > 0  # the main etcd still holds everything else


def test_a_full_etcd_raises_nospace_and_the_run_still_ends_cleanly(lessons_run: tuple[Path, str, int]) -> None:
    out = lessons_run[0]
    full = _last_step(out, "etcd-quota", "small-quota")
    assert full.etcd.alarms == ["NOSPACE"]
    assert sum(n for code, n in full.requests_by_code.items() if code.startswith("5")) > 0
    assert any("database space exceeded" in note for note in full.notes)
    assert _last_step(out, "etcd-quota", "headroom").etcd.alarms == []
    page = (out / "etcd-quota" / LESSON_PAGE).read_text()
    assert "etcd alarm raised: NOSPACE" in page and "NOSPACE alarm" in page  # recorded, and the cascade explained


def test_nodes_joined_inside_the_window(lessons_run: tuple[Path, str, int]) -> None:
    out = lessons_run[0]
    for variant, how in (("at-once", "at once"), ("spread", "spread over 20 s")):
        step = _last_step(out, "node-join-burst", variant)
        assert any(note.startswith(f"node join: 60 nodes joined {how} during the window") for note in step.notes)
        assert step.ramp["join_s"] > 0


def test_etcd_on_tmpfs_fsyncs_faster_than_on_disk(lessons_run: tuple[Path, str, int]) -> None:
    fsync = _comparisons(lessons_run[0], "etcd-disk", "etcd WAL fsync p99")[0]
    assert fsync["warned"][0] > fsync["fix"][0]


def test_memory_sweep_measured_every_step(lessons_run: tuple[Path, str, int]) -> None:
    growths = _summary(lessons_run[0], "apiserver-memory-per-node")["growths"]
    heap = growths[0]
    assert [nodes for nodes, _ in heap["points"]] == [10, 30, 60]
    assert heap["projected"] is not None and heap["band"] is not None


def test_anti_affinity_lesson_scheduled_pods_in_both_variants(lessons_run: tuple[Path, str, int]) -> None:
    out = lessons_run[0]
    bound = _comparisons(out, "anti-affinity", "pods bound per second")[0]
    assert bound["warned"][0] > 0 and bound["fix"][0] > 0
