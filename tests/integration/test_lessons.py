"""Every lesson at --scale small (each variant on its own fresh control plane): the lesson pages are written,
nothing is left running, and where the effect is robust at that size, its direction is asserted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from loadtests import results
from loadtests.analysis.lesson import LESSON_RESULTS, scrape_reading
from loadtests.analysis.projection import NOT_PROJECTABLE
from loadtests.analysis.scrapes import step_folder
from loadtests.controlplane.local import MEMORY_ROOT, clusters_root
from loadtests.report.lesson import LESSON_PAGE
from tests.cli import start_loadtest


class Lessons:
    """`loadtest lesson` runs at --scale small, one run a variant, each lesson once for the module (a few minutes
    each, so every test stays within the suite's per-test timeout); several names run in one command, as `make
    lessons` does."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.outputs: dict[str, str] = {}

    def run(self, *names: str) -> Path:
        key = "+".join(names)
        out = self.base / key
        if key not in self.outputs:
            proc = start_loadtest("lesson", *names, "--scale", "small", "--repeat", "1", "--out", str(out))
            try:
                stdout, stderr = proc.communicate(timeout=840)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            assert proc.returncode == 0, stdout[-4000:] + stderr[-4000:]
            self.outputs[key] = stdout
            assert_left_nothing(out, proc.pid)
            folders = [out] if len(names) == 1 else [out / name for name in names]
            assert all((folder / LESSON_PAGE).is_file() for folder in folders)
        return out  # one name: the lesson's folder; several: a folder of them (OUT/<name>/)


def assert_left_nothing(out: Path, pid: int) -> None:
    """No cluster folder of the command, no etcd data left in memory, no process still using its folder."""
    assert [p for p in clusters_root().glob(f"run-*-{pid}") if p.exists()] == []
    assert list(MEMORY_ROOT.glob(f"k8s-loadtest-run-*-{pid}-*")) == []
    strays = [p.info["pid"] for p in psutil.process_iter(["pid", "cmdline"])
              if any(str(out) in part for part in (p.info["cmdline"] or []))]
    assert strays == []


@pytest.fixture(scope="module")
def lessons(bins: Any, tmp_path_factory: pytest.TempPathFactory) -> Lessons:
    return Lessons(tmp_path_factory.mktemp("lessons"))


def _summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / LESSON_RESULTS).read_text())


def _comparisons(folder: Path, measure: str) -> list[dict[str, Any]]:
    return [c for c in _summary(folder)["comparisons"] if c["measure"] == measure]


def _last_step(folder: Path, variant: str) -> results.StepResult:
    run = results.load(folder / variant)
    assert run.status == "complete", run.error
    return run.steps[-1]


def test_two_lessons_in_one_command_write_their_pages_and_the_table(lessons: Lessons) -> None:
    out = lessons.run("etcd-disk", "apiserver-memory-per-node")
    stdout = lessons.outputs["etcd-disk+apiserver-memory-per-node"]
    for name in ("etcd-disk", "apiserver-memory-per-node"):
        assert (out / name / LESSON_PAGE).is_file()
        summary = _summary(out / name)
        # one run a variant: the effect, and no verdict (the noise is not measured)
        assert summary["verdict"] == "single run", (name, summary)
        assert f"lesson {name}: single run" in stdout
    assert "reproduced" not in stdout and "reproduced" not in (out / "lessons.md").read_text()
    table = (out / "lessons.md").read_text().splitlines()
    assert table[2].startswith("| `etcd-disk` |") and table[3].startswith("| `apiserver-memory-per-node` |")
    # etcd on a tmpfs fsyncs faster than on this machine's disk
    fsync = _comparisons(out / "etcd-disk", "etcd WAL fsync p99")[0]
    assert fsync["warned"][0] > fsync["fix"][0]
    # the sweep measured every step, and projected to the report's scale
    heap = _summary(out / "apiserver-memory-per-node")["growths"][0]
    assert [nodes for nodes, _ in heap["points"]] == [10, 30, 60]
    # projected to the report's scale with its band, or, where three single runs of a Go heap (which the
    # collector moves) do not support a projection, the page says why instead of a number
    assert (heap["projected"] is not None and heap["band"] is not None) or (
        heap["projected"] is None and heap["fit"].startswith(NOT_PROJECTABLE)), heap


def test_endpoints_send_more_bytes_than_endpointslices(lessons: Lessons) -> None:
    folder = lessons.run("endpoints-fanout")
    sent = _comparisons(folder, "bytes the apiserver sent to watchers of the Service's endpoints")[0]
    assert sent["warned"][0] > sent["fix"][0] > 0
    received = _comparisons(folder, "bytes the watchers received")[0]
    assert received["warned"][0] > received["fix"][0] > 0


def test_lists_without_resource_version_reach_etcd_only_without_the_watch_cache(lessons: Lessons) -> None:
    folder = lessons.run("list-agents")
    fetched = {c["against"]: c for c in _comparisons(folder, "pods the apiserver read from etcd for LISTs")}
    warned = fetched["watch-cache"]["warned"][0]
    assert warned > 0
    for fix in ("consistent-from-cache", "watch-cache", "informer"):
        assert fetched[fix]["fix"][0] < warned / 5, fix  # served from the watch cache: a fraction of the reads


def test_events_leave_the_main_etcd(lessons: Lessons) -> None:
    folder = lessons.run("events-etcd")
    shared = _last_step(folder, "shared-etcd").etcd.keys_by_prefix
    own = _last_step(folder, "events-etcd").etcd.keys_by_prefix
    assert shared["events"] > 0 and own["events"] == 0
    assert own["pods"] > 0  # the main etcd still holds everything else


def test_a_full_etcd_raises_nospace_and_the_run_still_ends_cleanly(lessons: Lessons) -> None:
    folder = lessons.run("etcd-quota")  # exit 0 and nothing left running: checked by the run itself
    full = _last_step(folder, "small-quota")
    assert full.etcd.alarms == ["NOSPACE"]
    assert sum(n for code, n in full.requests_by_code.items() if code.startswith("5")) > 0
    assert any("database space exceeded" in note for note in full.notes)
    assert _last_step(folder, "headroom").etcd.alarms == []
    page = (folder / LESSON_PAGE).read_text()
    assert "etcd alarm raised: NOSPACE" in page and "NOSPACE alarm" in page  # recorded, and the cascade explained


def test_nodes_joined_inside_the_window_and_flow_control_saw_every_client_as_in_production(
        lessons: Lessons) -> None:
    folder = lessons.run("node-join-burst")
    for variant, how in (("at-once", "at once"), ("spread", "spread over 20 s")):
        step = _last_step(folder, variant)
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
    bound = _comparisons(lessons.run("anti-affinity"), "pods bound per second")[0]
    assert bound["warned"][0] > 0 and bound["fix"][0] > 0
