"""Cluster health in the report: a summary per step, a chart over time per step, warnings from its figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

from loadtests.analysis.figures import health_rows
from loadtests.report.html import write_report
from loadtests.results import load
from tests.unit.reportdata import SAMPLE, copy_run, edited_run, with_health


def test_each_step_gets_its_health_summary_and_chart(tmp_path: Path) -> None:
    folder = edited_run(SAMPLE, tmp_path / "run", with_health(not_ready_at=1))
    html = write_report(folder).read_text(encoding="utf-8")
    divs = re.findall(r'<div class="chart" id="(chart-[a-z0-9_]+)"></div>', html)
    health = [d for d in divs if d.startswith("chart-health")]
    assert health == ["chart-health_0", "chart-health_1", "chart-health_2"]
    assert len([d for d in divs if not d.startswith("chart-projection")]) == 16  # 13 across steps, 3 over time
    payload = json.loads(re.search(r"var figures = (\[.*?\]);\n", html, flags=re.DOTALL).group(1))
    assert [f["id"] for f in payload] == divs  # drawn in page order
    health_chart = next(f["figure"] for f in payload if f["id"] == "chart-health_1")
    names = [trace["name"] for trace in health_chart["data"]]
    assert {"NotReady nodes", "lease lag", "lease duration 40 s", "machine", "kube-apiserver"} <= set(names)
    assert all(len(trace["x"]) == 13 for trace in health_chart["data"])
    assert html.count("Cluster health through the step") == 3
    assert "10.32 s of 40 s" in html and "65.00 s of 40 s" in html
    # the step that lost nodes is flagged, in its summary and in the warnings (top of the page and the step)
    assert html.count("3 kwok nodes NotReady at the worst moment (3 unreachable)") == 2
    assert html.count("a node Lease went 65.00 s without renewal (162% of its 40 s duration)") == 2
    assert re.search(r'<div class="card bad"[^>]*><div class="k">NotReady nodes \(max\)</div><div class="v">3<', html)
    assert "deepest work queues: garbage_collector_graph_changes 2" in html


def test_a_step_without_health_has_no_health_section(tmp_path: Path) -> None:
    html = write_report(copy_run(SAMPLE, tmp_path / "run")).read_text(encoding="utf-8")
    assert "Cluster health" not in html and "chart-health" not in html
    assert all(not health_rows(step) for step in load(tmp_path / "run").steps)


def test_rows_keep_what_was_measured_in_a_sensible_order(tmp_path: Path) -> None:
    step = load(edited_run(SAMPLE, tmp_path / "run", with_health())).steps[0]
    rows = {row.title: [line.label for line in lines] for row, lines in health_rows(step)}
    assert rows["CPU (100 % = one core)"] == ["machine", "iowait", "etcd", "kube-apiserver"]
    assert rows["Queues (now)"][:2] == ["work queues, all", "deepest work queue"]
    assert "apiserver in flight: mutating" in rows["Queues (now)"]
    assert "taint-manager evictions" not in rows["Events (per interval)"]  # never sampled: no line


def test_a_p99_that_is_only_a_histogram_bound_is_shown_as_one(tmp_path: Path) -> None:
    health = with_health()

    def edit(data: dict) -> None:
        health(data)
        step = data["steps"][0]
        step["etcd"].update(wal_fsync_p99_s=0.001, bounds={"wal_fsync_p99_s": "<"})
        step["health"]["summary"].update(etcd_wal_fsync_p99_max_s=0.001, bounds={"etcd_wal_fsync_p99_max_s": "<"})

    html = write_report(edited_run(SAMPLE, tmp_path / "run", edit)).read_text(encoding="utf-8")
    assert re.search(r"WAL fsync p99</t[dh]><td[^>]*>&lt; 1.0 ms<", html)
    assert re.search(r'etcd fsync p99 \(max\)</div><div class="v">&lt; 1.0 ms<', html)
    assert "&lt; 3.0 ms" not in html  # the other steps' measured values stay values
