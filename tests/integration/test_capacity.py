"""Saturation and the capacity search on a real control plane, kept tiny: a step made to saturate on purpose
(kwok paused, so new nodes never turn Ready and old ones lapse), and a search that stops at its limit."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from loadtests import results
from tests.checks import assert_nothing_left
from tests.cli import loadtest
from tests.watched import WatchedRun


def write_plan(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_step_that_does_not_converge_is_saturated_and_the_run_stops_growing(bins, tmp_path: Path) -> None:
    # short leases (factor 0.2: 8 s leases, 10 s node-monitor grace) so a paused kwok shows within seconds;
    # the health watch waits longer than the ramp budget, so the stall is a finding, not a fault
    plan = write_plan(tmp_path / "saturate.yaml", """
name: saturate
target: {heartbeat_factor: 0.2, unresponsive_s: 300}
steps:
  - {nodes: 5, pods_per_node: 1, warmup_s: 1, duration_s: 8}
  - {nodes: 200, pods_per_node: 1, warmup_s: 1, duration_s: 8, ramp_timeout_s: 25}
  - {nodes: 300, pods_per_node: 1, warmup_s: 1, duration_s: 8}
load:
  scenarios:
    pod_churn: {rate: 2, lifetime_s: 3, users: 1}
""")
    run = WatchedRun(tmp_path, plan=plan)
    run.wait_line("step 2/3 (200 nodes): scaling to 200 nodes")
    os.kill(run.component("kwok").pid, signal.SIGSTOP)
    code = run.finish(timeout_s=240)
    assert code == 1, run.stdout[-3000:] + run.stderr[-2000:]
    saved = results.load(run.out)
    assert saved.status == "complete" and [s.status for s in saved.steps] == ["measured", "saturated"]
    saturation = saved.steps[1].saturation
    assert saturation["condition"] == "200 nodes Ready", saturation
    assert "200 of 200 nodes NotReady" in saturation["evidence"], saturation
    assert "kwok 0 (process stopped)" in saturation["evidence"], saturation
    assert any(line.startswith("SATURATED") for line in run.lines), run.stdout[-2000:]
    assert "saturated" in (run.out / "report.html").read_text().lower()
    assert_nothing_left(run.seen)


def test_a_capacity_search_on_a_tiny_budget_reports_its_largest_scale(bins, tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "tiny-capacity.yaml", """
name: tiny-capacity
steps:
  - {nodes: 5, pods_per_node: 1, warmup_s: 0, duration_s: 5}
capacity: {growth: 2}
load:
  scenarios:
    pod_churn: {rate: 1, lifetime_s: 2, users: 1}
""")
    out = tmp_path / "capacity"
    searched = loadtest("capacity", "--plan", str(plan), "--max-nodes", "20", "--out", str(out), timeout=600)
    assert searched.returncode == 0, searched.stdout[-3000:] + searched.stderr[-2000:]
    assert [s.nodes for s in results.load(out).steps] == [5, 10, 20]
    last = searched.stdout.strip().splitlines()[-1]
    assert last.startswith("largest scale where every SLO held: 20 nodes"), last
    assert json.loads(loadtest("status", "--json").stdout)["orphans"] == []
