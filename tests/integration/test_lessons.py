"""Every lesson at --scale small (each variant on its own fresh control plane): the lesson pages are written,
nothing is left running, and where the effect is robust at that size, its direction is asserted. Where an
assertion reads a state, a count or an effect many times its noise, the test runs a copy of the lesson with
shorter windows and warm-ups (Lessons.shortened; each says why its assertions can still fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadtests import results
from loadtests.analysis.projection import NOT_PROJECTABLE
from loadtests.analysis.query import scrape_reading
from loadtests.analysis.scrapes import step_folder
from loadtests.report.lesson import LESSON_PAGE
from tests.integration.lessonrun import Lessons, comparisons, last_step, lesson_summary


@pytest.fixture(scope="module")
def lessons(bins: Any, tmp_path_factory: pytest.TempPathFactory) -> Lessons:
    return Lessons(tmp_path_factory.mktemp("lessons"))


# 5 s windows, 1 s warm-ups: tens of etcd writes a second give the fsync p99s hundreds of samples, and the sweep's
# points are its steps whatever their windows
QUICK = {"duration_s": 5, "warmup_s": 1}


def test_two_lessons_in_one_command_write_their_pages_and_the_table(lessons: Lessons) -> None:
    out = lessons.run(lessons.shortened("etcd-disk", QUICK), lessons.shortened("apiserver-memory-per-node", QUICK))
    stdout = lessons.outputs["etcd-disk+apiserver-memory-per-node"]
    for name in ("etcd-disk", "apiserver-memory-per-node"):
        assert (out / name / LESSON_PAGE).is_file()
        summary = lesson_summary(out / name)
        # one run a variant: the effect, and no verdict (the noise is not measured)
        assert summary["verdict"] == "single run", (name, summary)
        assert f"lesson {name}: single run" in stdout
    assert "reproduced" not in stdout and "reproduced" not in (out / "lessons.md").read_text()
    table = (out / "lessons.md").read_text().splitlines()
    assert table[2].startswith("| `etcd-disk` |") and table[3].startswith("| `apiserver-memory-per-node` |")
    # etcd on a tmpfs fsyncs faster than on this machine's disk
    fsync = comparisons(out / "etcd-disk", "etcd WAL fsync p99")[0]
    assert fsync["warned"][0] > fsync["fix"][0]
    # the sweep measured every step, and projected to the report's scale
    heap = lesson_summary(out / "apiserver-memory-per-node")["growths"][0]
    assert [nodes for nodes, _ in heap["points"]] == [10, 30, 60]
    # projected to the report's scale with its band, or, where three single runs of a Go heap (which the
    # collector moves) do not support a projection, the page says why instead of a number
    assert (heap["projected"] is not None and heap["band"] is not None) or (
        heap["projected"] is None and heap["fit"].startswith(NOT_PROJECTABLE)), heap


def test_endpoints_send_more_bytes_than_endpointslices(lessons: Lessons) -> None:
    # 6 s: the churn rewrites the Service's ~420 endpoints a few times a second; Endpoints watchers get them whole,
    # slices a slice, an effect of about ×8 at any window length (and 0 bytes to either fails)
    folder = lessons.run(lessons.shortened("endpoints-fanout", {"duration_s": 6, "warmup_s": 1}))
    sent = comparisons(folder, "bytes the apiserver sent to watchers of the Service's endpoints")[0]
    assert sent["warned"][0] > sent["fix"][0] > 0
    received = comparisons(folder, "bytes the watchers received")[0]
    assert received["warned"][0] > received["fix"][0] > 0


def test_lists_without_resource_version_reach_etcd_only_without_the_watch_cache(lessons: Lessons) -> None:
    # 5 s: about 10 LISTs of 50+ pods from etcd without the watch cache, against none of the pollers' with it
    folder = lessons.run(lessons.shortened("list-agents", QUICK))
    fetched = {c["against"]: c for c in comparisons(folder, "pods the apiserver read from etcd for LISTs")}
    warned = fetched["watch-cache"]["warned"][0]
    assert warned > 0
    for fix in ("consistent-from-cache", "watch-cache", "informer"):
        assert fetched[fix]["fix"][0] < warned / 5, fix  # served from the watch cache: a fraction of the reads


def test_events_leave_the_main_etcd(lessons: Lessons) -> None:
    # keys held at the window's close: a shorter window changes where Events are stored in neither variant
    folder = lessons.run(lessons.shortened("events-etcd", QUICK))
    shared = last_step(folder, "shared-etcd").etcd.keys_by_prefix
    own = last_step(folder, "events-etcd").etcd.keys_by_prefix
    assert shared["events"] > 0 and own["events"] == 0
    assert own["pods"] > 0  # the main etcd still holds everything else


# the lesson's 40 MiB filled at ~2 MB/s takes ~25 s of its 40 s window; 16 MiB at the same rate fills ~8 s into a
# 20 s window (the headroom variant keeps its 8 GiB, so its alarm list stays the check that nothing else raises one)
FULL_SOONER = {"target": {"component_args": {"etcd": ["--quota-backend-bytes=16777216"]}}}


def test_a_full_etcd_raises_nospace_and_the_run_still_ends_cleanly(lessons: Lessons) -> None:
    # exit 0 and nothing left running: checked by the run itself
    folder = lessons.run(lessons.shortened("etcd-quota", {"duration_s": 20}, base=FULL_SOONER))
    full = last_step(folder, "small-quota")
    assert full.etcd.alarms == ["NOSPACE"]
    assert sum(n for code, n in full.requests_by_code.items() if code.startswith("5")) > 0
    assert any("database space exceeded" in note for note in full.notes)
    assert last_step(folder, "headroom").etcd.alarms == []
    page = (folder / LESSON_PAGE).read_text()
    assert "etcd alarm raised: NOSPACE" in page and "NOSPACE alarm" in page  # recorded, and the cascade explained


# the spread join over 10 s of a 16 s window (the lesson's: 20 s of 25): its 60 nodes were all Ready within 1 s
# of the last one's creation, so the note that they joined during the window can still fail only if they did not
SPREAD_S = 10


def test_nodes_joined_inside_the_window_and_flow_control_saw_every_client_as_in_production(
        lessons: Lessons) -> None:
    folder = lessons.run(lessons.shortened("node-join-burst", {"duration_s": 16},
                                           variants={"spread": {"every_step": {"join": {"over_s": SPREAD_S}}}}))
    for variant, how in (("at-once", "at once"), ("spread", f"spread over {SPREAD_S} s")):
        step = last_step(folder, variant)
        assert any(note.startswith(f"node join: 60 nodes joined {how} during the window") for note in step.notes)
        assert step.ramp["join_s"] > 0, step.ramp
        # measured, or (on a machine busy with the rest of the suite) saturated for what the lesson is about:
        # joined nodes that did not stay Ready, never for another reason
        held = step.status == "measured" or step.saturation["condition"].endswith(" nodes stayed Ready")
        assert held, step.saturation
        # kwok's heartbeats and the joining nodes' registrations, as kubelets', and the load as a user's
        assert _dispatched(folder / variant, step, "system-node-high") > 0
        assert _dispatched(folder / variant, step, "system-nodes") > 0
        assert _dispatched(folder / variant, step, "global-default") > 0


def _dispatched(run_folder: Path, step: results.StepResult, flow_schema: str) -> float | None:
    """Requests flow control dispatched under one flow schema during the step's window (its kept pages)."""
    return scrape_reading(step, step_folder(run_folder, step.index), {
        "metric": "apiserver_flowcontrol_dispatched_requests_total", "labels": {"flow_schema": flow_schema}})[0]


def test_anti_affinity_lesson_scheduled_pods_in_both_variants(lessons: Lessons) -> None:
    # 6 s: a pod created a second, each bound or not; none bound in either variant fails
    bound = comparisons(lessons.run(lessons.shortened("anti-affinity", {"duration_s": 6, "warmup_s": 1})),
                        "pods bound per second")[0]
    assert bound["warned"][0] > 0 and bound["fix"][0] > 0
