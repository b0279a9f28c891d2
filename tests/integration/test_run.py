"""`loadtest run` end to end against a control plane it starts itself: counts agree, faults end cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from loadtests import results
from loadtests.binaries import cache_root
from loadtests.controlplane.processes import ProcessRecord, wait_for
from tests.checks import assert_nothing_left
from tests.cli import start_loadtest, write_tiny_plan


def test_smoke_plan_end_to_end(bins, tmp_path: Path) -> None:
    out = tmp_path / "smoke"
    # a relative --out, as users type it
    proc = start_loadtest("run", "--out", "smoke", "--plan", "smoke", "--no-gate", cwd=tmp_path)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    run = results.load(out)
    assert run.status == "complete" and [s.nodes for s in run.steps] == [10, 20]
    assert (out / "report.html").stat().st_size > 100_000 and (out / "junit.xml").exists()
    for step in run.steps:
        client_creates = sum(c.count for c in step.client if c.name == "POST pods")
        server_creates = step.server_requests["POST pods"]
        assert client_creates > 20, step.client
        assert abs(client_creates - server_creates) <= 0.05 * client_creates, (client_creates, server_creates)
        assert step.pod_startup.count > 0 and step.pod_startup.p99 is not None
        assert step.watch_delay.count > 0
        assert step.etcd.db_size_bytes and step.etcd.db_size_bytes > 0
        assert any(s.verb == "POST" and s.resource == "pods" and s.p99 for s in step.server)
        components = {p.component for p in step.processes}
        assert {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok",
                "loadgen"} <= components
    # nothing secret lands in the results folder
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".html", ".xml", ".csv", ".log"):
            text = path.read_text(errors="replace")
            assert "PRIVATE KEY" not in text, path


def _run_and_interrupt(tmp_path: Path, interrupt) -> tuple[subprocess.Popen, str, str, Path, list]:
    """Start a short run, wait until its first step is saved and the second is under load, then interrupt."""
    plan = write_tiny_plan(tmp_path / "fault.yaml", "fault", (8, 30))
    out = tmp_path / "run"
    proc = start_loadtest("run", "--out", str(out), "--plan", str(plan))
    state_file = cache_root() / "clusters" / f"run-{out.name}-{proc.pid}" / "state.json"

    def second_step_loaded() -> bool:
        try:
            return len(results.load(out).steps) == 1 and (out / "step-2" / "locust.log").exists()
        except (OSError, ValueError):
            return False

    try:
        wait_for(second_step_loaded, 300, "step 1 saved and step 2 under load",
                 abort=lambda: None if proc.poll() is None else f"run exited early: {proc.stderr.read()}")
        records = [ProcessRecord(**p) for p in json.loads(state_file.read_text())["processes"]]
        children = psutil.Process(proc.pid).children(recursive=True)
        interrupt(proc, records)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, stdout, stderr, out, records + children


def _assert_partial_results(out: Path, error_words: str) -> None:
    run = results.load(out)
    assert run.status == "aborted" and error_words in (run.error or "")
    assert len(run.steps) == 1 and run.steps[0].nodes == 5
    assert (out / "report.html").exists() and (out / "junit.xml").exists()
    assert "aborted" in (out / "report.html").read_text().lower()


def test_etcd_killed_mid_step_ends_with_one_error_and_partial_report(bins, tmp_path: Path) -> None:
    def kill_etcd(_proc, records) -> None:
        etcd = next(r for r in records if r.component == "etcd")
        os.kill(etcd.pid, signal.SIGKILL)

    proc, stdout, stderr, out, leftovers = _run_and_interrupt(tmp_path, kill_etcd)
    assert proc.returncode == 3, stdout[-2000:] + stderr[-2000:]
    errors = [line for line in (stdout + stderr).splitlines() if line.startswith("loadtest:")]
    assert len(errors) == 1 and "etcd stopped running" in errors[0], errors
    _assert_partial_results(out, "etcd stopped running")
    assert_nothing_left(leftovers)


def test_ctrl_c_mid_step_ends_with_partial_report(bins, tmp_path: Path) -> None:
    def ctrl_c(proc, _records) -> None:
        proc.send_signal(signal.SIGINT)

    started = time.monotonic()
    proc, stdout, stderr, out, leftovers = _run_and_interrupt(tmp_path, ctrl_c)
    assert proc.returncode == 3, stdout[-2000:] + stderr[-2000:]
    assert "interrupted" in stdout + stderr
    _assert_partial_results(out, "interrupted")
    assert_nothing_left(leftovers)
    assert time.monotonic() - started < 300


