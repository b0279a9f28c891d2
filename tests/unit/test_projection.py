"""Projections: the fits recover known growth, the band is as wide as the data is noisy, SLO crossings are found,
and the report shows a projection only when the run measured enough steps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from loadtests.plan import DEFAULT_PROJECT_TO
from loadtests.report import projection, write_report
from loadtests.report.projection import fit, project
from loadtests.results import (
    ClusterHealth,
    Distribution,
    EtcdStats,
    ProcessStat,
    RunResult,
    ServerLatency,
    StepResult,
)
from tests.unit.reportdata import SAMPLE, copy_run, edited_run

NODES = [100, 250, 500, 1000, 2000]
# deterministic "measurement noise" of about 1 %, alternating in sign
JITTER = np.array([1.01, 0.99, 1.008, 0.993, 1.004])


def within(found: float, expected: float, share: float = 0.05) -> bool:
    return abs(found - expected) <= share * abs(expected)


def test_linear_growth_is_recovered() -> None:
    y = (40.0 + 0.3 * np.array(NODES)) * JITTER
    found = fit(NODES, y)
    assert found is not None and found.model == "linear"
    assert within(found.a, 40.0) and within(found.b, 0.3)
    assert within(float(found.predict([7500])[0]), 40.0 + 0.3 * 7500)
    assert found.r2 > 0.99


def test_power_law_growth_is_recovered() -> None:
    y = 2.0 * np.power(np.array(NODES, dtype=float), 1.5) * JITTER
    found = fit(NODES, y)
    assert found is not None and found.model == "power"
    assert within(found.b, 1.5)
    assert within(float(found.predict([7500])[0]), 2.0 * 7500 ** 1.5)


def test_a_power_law_needs_positive_values() -> None:
    y = np.array([0.0, 1.0, 4.0, 9.0, 16.0])  # a zero: no log, so the line is the only candidate
    found = fit(NODES, y)
    assert found is not None and found.model == "linear"


def test_two_points_give_no_projection() -> None:
    assert fit([100, 500], [1.0, 2.0]) is None
    assert fit([100, 100, 500], [1.0, 1.1, 2.0]) is None  # three points, two scales
    found = project(synthetic_run([100, 500]))
    assert found.projections == [] and "at least 3 measured steps" in found.reason


def test_noisy_data_gives_a_wider_band_than_clean_data() -> None:
    trend = 10.0 + 0.05 * np.array(NODES)
    clean = fit(NODES, trend * JITTER)
    noisy = fit(NODES, trend * np.array([1.3, 0.75, 1.25, 0.8, 1.2]))
    assert clean is not None and noisy is not None
    clean_low, clean_high = clean.interval([7500])
    noisy_low, noisy_high = noisy.interval([7500])
    assert noisy_high[0] - noisy_low[0] > 3 * (clean_high[0] - clean_low[0])
    # and the band holds the fitted value
    assert clean_low[0] < clean.predict([7500])[0] < clean_high[0]


def test_three_steps_give_a_wider_band_than_five() -> None:
    def width(nodes: list[int]) -> float:
        wobble = np.array([1.02, 0.98] * 3)[:len(nodes)]
        found = fit(nodes, (10.0 + 0.1 * np.array(nodes)) * wobble)
        assert found is not None and found.model == "linear"
        low, high = found.interval([5000])
        assert np.isfinite(low[0]) and np.isfinite(high[0])
        return float(high[0] - low[0])

    assert width([100, 500, 1000]) > 2 * width([100, 250, 500, 750, 1000])


def test_a_rising_latency_crosses_its_slo() -> None:
    found = fit(NODES, [0.05 + 0.0001 * n for n in NODES])
    assert found is not None
    crossing = found.crossing(1.0)
    assert crossing is not None and within(crossing, 9500)


def test_a_falling_latency_never_crosses() -> None:
    found = fit(NODES, [0.5 - 0.0001 * n for n in NODES])
    assert found is not None and found.b < 0
    assert found.crossing(1.0) is None
    flat = fit(NODES, [0.2] * len(NODES))
    assert flat is not None and flat.crossing(1.0) is None
    slow = fit(NODES, [0.01 + 1e-9 * n for n in NODES])  # rising, but not within a million nodes
    assert slow is not None and slow.crossing(1.0) is None


def test_t_quantiles_shrink_towards_the_normal() -> None:
    assert projection.t_quantile(1) == pytest.approx(12.706)
    assert projection.t_quantile(30) == pytest.approx(2.042)
    assert projection.t_quantile(200) == pytest.approx(1.96)


# ---- projections of a run -----------------------------------------------------------------------------------


def synthetic_run(nodes: list[int], cpu_machine_avg: float | None = None, cpus: int = 2,
                  project_to: list[int] | None = None) -> RunResult:
    """A run whose figures grow in known ways: latency and memory linearly, etcd keys with nodes."""
    steps = []
    for i, n in enumerate(nodes):
        summary = {} if cpu_machine_avg is None else {"cpu_machine_avg": cpu_machine_avg, "cpus": cpus}
        steps.append(StepResult(
            index=i, name=f"{n} nodes", nodes=n, pods_per_node=3, started_at="2026-01-01T00:00:00+00:00",
            duration_s=60.0,
            server=[ServerLatency("POST", "pods", "resource", "", "", 500, 0.01, 0.02, 0.05 + 0.0001 * n),
                    ServerLatency("LIST", "pods", "cluster", "", "", 50, 0.02, 0.05, 0.1 + 0.00002 * n)],
            pod_startup=Distribution(count=300, p50=1.0, p90=1.5, p99=2.0 + 0.001 * n, max=3.0),
            etcd=EtcdStats(db_size_bytes=2e6 + 4e4 * n, keys_total=500.0 + 13 * n),
            processes=[ProcessStat("kube-apiserver", 20.0 + 0.05 * n, 60.0, int(3e8 + 1e6 * n), int(3e8)),
                       ProcessStat("etcd", 5.0 + 0.01 * n, 10.0, int(5e7 + 1e4 * n), int(5e7))],
            storage_objects={"pods": 3.0 * n + 20, "nodes": float(n), "namespaces": 4.0},
            health=ClusterHealth(summary=summary),
        ))
    plan: dict = {"name": "synthetic", "steps": [{"nodes": n, "pods_per_node": 3} for n in nodes]}
    if project_to is not None:
        plan["project_to"] = project_to
    return RunResult(run_id="synthetic", plan=plan, environment={"machine": {"cpus": cpus}}, status="complete",
                     steps=steps)


def test_a_run_is_projected_from_its_series() -> None:
    found = project(synthetic_run([100, 250, 500, 1000]))
    assert found.targets == DEFAULT_PROJECT_TO  # no project_to in the stored plan: the defaults beyond 1,000
    by_label = {p.label: p for p in found.projections}
    assert {"server p99 POST pods", "server p99 LIST pods (cluster)", "pod startup p99", "etcd keys",
            "etcd DB size (total)", "kube-apiserver RSS", "CPU kube-apiserver", "CPU etcd", "stored pods",
            "stored nodes"} <= set(by_label)
    assert "stored namespaces" in found.flat  # the same at every step: nothing to project
    keys = by_label["etcd keys"]
    assert keys.fit.model == "linear" and within(keys.values[0], 500 + 13 * 2500)
    post = by_label["server p99 POST pods"]
    assert post.threshold == 1.0 and within(post.crossing, 9500)
    assert by_label["server p99 LIST pods (cluster)"].threshold == 30.0
    assert by_label["pod startup p99"].threshold == 5.0 and within(by_label["pod startup p99"].crossing, 3000)
    assert by_label["kube-apiserver RSS"].threshold is None

    table = found.table()
    assert list(table["figure"]) == [p.label for p in found.projections]
    assert {"model", "r2", "points", "at_2500", "low_2500", "high_7500", "crossing_nodes", "cpu_bound"} <= set(
        table.columns)
    row = table.set_index("figure").loc["etcd keys"]
    assert row["points"] == 4 and row["low_2500"] <= row["at_2500"] <= row["high_2500"]


def test_project_to_comes_from_the_plan_and_saturated_steps_do_not_count() -> None:
    run = synthetic_run([100, 250, 500, 1000], project_to=[4000])
    run.steps[-1].status = "saturated"
    found = project(run)
    assert found.targets == [4000]
    assert found.measured_nodes == [100, 250, 500]
    assert all(p.x == [100, 250, 500] for p in found.projections)
    run.steps[-2].status = "saturated"
    assert project(run).reason.startswith("A projection needs at least 3 measured steps")


def test_defaults_are_filtered_beyond_the_largest_planned_step() -> None:
    assert projection.targets(synthetic_run([100, 500, 3000])) == [n for n in DEFAULT_PROJECT_TO if n > 3000]


def test_latency_and_cpu_fitted_over_cpu_bound_steps_are_flagged() -> None:
    busy = project(synthetic_run([100, 250, 500], cpu_machine_avg=180.0, cpus=2))  # 90 % of two cores
    assert busy.cpu_bound_nodes == [100, 250, 500]
    flagged = {p.label for p in busy.projections if p.cpu_bound}
    assert {"server p99 POST pods", "pod startup p99", "CPU kube-apiserver"} <= flagged
    assert not {"etcd keys", "kube-apiserver RSS", "stored pods"} & flagged
    note = projection.cpu_note(busy)
    assert "CPU-bound on this machine" in note and "server p99 POST pods" in note and "etcd keys" not in note

    idle = project(synthetic_run([100, 250, 500], cpu_machine_avg=100.0, cpus=2))
    assert idle.cpu_bound_nodes == [] and not any(p.cpu_bound for p in idle.projections)
    assert "No measured step was CPU-bound" in projection.cpu_note(idle)
    assert "not recorded" in projection.cpu_note(project(synthetic_run([100, 250, 500])))


# ---- the report's Projection section ------------------------------------------------------------------------


def test_report_shows_the_projection_table_and_charts(tmp_path: Path) -> None:
    html = write_report(copy_run(SAMPLE, tmp_path / "run")).read_text(encoding="utf-8")
    section = html[html.index('<h2 id="projection">'):html.index('<h2 id="metadata">')]
    assert "A projection is an extrapolation of this run's measured steps (100, 500, 1,000 nodes)" in section
    assert "95 % prediction interval" in section
    assert '<table id="projection-table">' in section
    assert "at 2,500 nodes" in section and "at 7,500 nodes" in section
    for figure in ("server p99 POST pods", "pod startup p99", "etcd keys", "kube-apiserver RSS", "CPU etcd"):
        assert f"<td>{figure}</td>" in section
    assert 'id="projection-cpu"' in section
    payload = json.loads(re.search(r"var figures = (\[.*?\]);\n", html, flags=re.DOTALL).group(1))
    drawn = {f["id"]: f["figure"] for f in payload}
    startup = drawn["chart-projection_pod_startup"]
    names = [trace["name"] for trace in startup["data"]]
    assert {"p99 · 95 % band", "p99 · fit", "p99 · projection", "p99 · projected", "p99", "SLO 5 s"} <= set(names)
    band = next(t for t in startup["data"] if t["name"] == "p99 · 95 % band")
    assert band["fill"] == "toself"
    extrapolation = next(t for t in startup["data"] if t["name"] == "p99 · projection")
    assert extrapolation["line"]["dash"] == "dash" and max(extrapolation["x"]) == 7500


def test_report_of_two_steps_says_there_are_not_enough(tmp_path: Path) -> None:
    def two_steps(data: dict) -> None:
        data["steps"] = data["steps"][:2]

    html = write_report(edited_run(SAMPLE, tmp_path / "run", two_steps)).read_text(encoding="utf-8")
    section = html[html.index('<h2 id="projection">'):html.index('<h2 id="metadata">')]
    assert "A projection needs at least 3 measured steps at different scales; this run has 2" in section
    assert "projection-table" not in section and "chart-projection" not in html
