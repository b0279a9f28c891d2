"""Projections: the fits recover known growth, the band is as wide as the data is noisy, as wide as the model
choice and the leave-one-out error say (so collinear steps do not give a falsely narrow band), SLO crossings are
found, a figure the steps cannot project says why, and the projection check counts how often the bands held."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import projection_check
from loadtests.analysis import projection
from loadtests.analysis.projection import LOO_LIMIT_PER_DOUBLING, NOT_PROJECTABLE, Abstention, fit, project
from loadtests.config.plan import DEFAULT_PROJECT_TO
from loadtests.report.html import write_report
from loadtests.results import RunResult, StepResult
from loadtests.results.apiserver import ServerLatency
from loadtests.results.distribution import Distribution
from loadtests.results.etcd import EtcdStats
from loadtests.results.health import ClusterHealth, HealthSummary
from loadtests.results.processes import ProcessStat
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
    assert projection.t_quantile(1) == pytest.approx(12.706, abs=1e-3)
    assert projection.t_quantile(30) == pytest.approx(2.042, abs=1e-3)
    assert projection.t_quantile(200) == pytest.approx(1.972, abs=1e-3)  # not yet the normal 1.960
    assert projection.t_quantile(10**6) == pytest.approx(1.960, abs=1e-3)
    with pytest.raises(ValueError, match="degree of freedom"):
        projection.t_quantile(0)


# ---- the band: model choice and leave-one-out --------------------------------------------------------------


def test_collinear_points_do_not_give_a_falsely_narrow_band() -> None:
    """Pods at three steps, exactly 3 per node plus 50: no residual, so the line's own interval has no width,
    and a 1,000-node step that measured 2 pods more would fall outside it."""
    found = fit([100, 250, 500], [350.0, 800.0, 1550.0])
    assert found is not None and found.model == "linear"
    own_low, own_high = found.model_interval([1000])
    assert own_high[0] - own_low[0] == pytest.approx(0.0, abs=1e-6)
    # left out, the 100-node step is predicted by the power law through the other two, which fits them as well
    assert found.loo_per_doubling > 0.01
    low, high = found.interval([1000])
    assert high[0] - low[0] == pytest.approx(2 * found.loo_half_width([1000])[0])
    assert low[0] < 3052 < high[0]
    # grown with the distance: twice the doublings beyond the steps, twice the half-width
    assert found.loo_half_width([2000])[0] / found.predict([2000])[0] == pytest.approx(
        2 * found.loo_half_width([1000])[0] / found.predict([1000])[0])
    # inside the measured steps the prediction intervals speak, not the leave-one-out error
    assert found.loo_half_width([300])[0] == 0.0


def test_a_proportional_count_keeps_its_exact_band() -> None:
    """Nodes are nodes: both models go through y = x and through every left-out step, nothing to widen."""
    found = fit([100, 250, 500], [100.0, 250.0, 500.0])
    assert found is not None and found.loo_per_doubling == pytest.approx(0.0, abs=1e-9)
    low, high = found.interval([2000])
    assert low[0] == pytest.approx(2000.0) and high[0] == pytest.approx(2000.0)


def test_the_model_choice_widens_the_band() -> None:
    """Steps that a line and a power law fit about as well: the band spans what either would predict."""
    found = fit([100, 250, 500], [1.0, 2.2, 4.1])
    assert found is not None and found.model == "linear"
    assert 0.3 < found.weight < 0.7  # the steps barely choose
    own_low, own_high = found.model_interval([2000])
    averaged_low, averaged_high = found.averaged_interval([2000])
    low, high = found.interval([2000])
    assert averaged_low[0] < own_low[0] - 1.0  # the power law's lower growth pulls the band down
    assert low[0] <= averaged_low[0] and high[0] >= max(own_high[0], averaged_high[0])
    assert high[0] - low[0] > 1.3 * (own_high[0] - own_low[0])
    power = next(m for m in found.candidates if m.model == "power")
    assert low[0] < float(power.predict([2000])[0]) < high[0]

    decided = fit([100, 250, 500], [10.0, 21.0, 37.0])  # the power law fits these far better
    assert decided is not None and decided.model == "power" and decided.weight > 0.99
    own_low, own_high = decided.model_interval([2000])
    averaged_low, averaged_high = decided.averaged_interval([2000])
    assert averaged_high[0] - averaged_low[0] < 1.05 * (own_high[0] - own_low[0])


def test_a_large_leave_one_out_error_makes_a_fit_not_projectable() -> None:
    jump = fit([100, 250, 500], [0.10, 0.11, 0.50])  # the last step is 4.5 times the others' trend
    assert jump is not None and jump.loo_per_doubling > LOO_LIMIT_PER_DOUBLING
    reason = jump.not_projectable("s")
    assert reason.startswith("leave-one-out error ") and "per doubling of nodes, beyond the 50 % bound" in reason
    worst = jump.worst
    assert worst is not None and worst.per_doubling == jump.loo_per_doubling
    assert worst.measured == {100: 0.10, 250: 0.11, 500: 0.50}[int(worst.nodes)]
    assert f"fitted without the {worst.nodes:,.0f}-node step" in reason
    assert f"{projection.signed(worst.predicted, 's')} there, {projection.signed(worst.measured, 's')} was" in reason
    smooth = fit([100, 250, 500], [0.10, 0.20, 0.41])
    assert smooth is not None and smooth.not_projectable("s") == ""


# ---- projections of a run -----------------------------------------------------------------------------------


def synthetic_run(nodes: list[int], cpu_machine_avg: float | None = None, cpus: int = 2,
                  project_to: list[int] | None = None) -> RunResult:
    """A run whose figures grow in known ways: latency and memory linearly, etcd keys with nodes."""
    steps = []
    for i, n in enumerate(nodes):
        summary = (HealthSummary() if cpu_machine_avg is None
                   else HealthSummary(cpu_machine_avg=cpu_machine_avg, cpus=cpus))
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

    assert found.abstained == []  # every growth here is smooth and no step was CPU-bound
    table = found.table()
    assert list(table["figure"]) == [f.label for f in found.figures]
    assert {"model", "r2", "points", "at_2500", "low_2500", "high_7500", "crossing_nodes", "cpu_bound",
            "loo_per_doubling", "weight", "not_projectable"} <= set(table.columns)
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


def test_latency_and_cpu_fitted_over_cpu_bound_steps_are_not_projected() -> None:
    busy = project(synthetic_run([100, 250, 500], cpu_machine_avg=180.0, cpus=2))  # 90 % of two cores
    assert busy.cpu_bound_nodes == [100, 250, 500]
    abstained = {a.label: a for a in busy.abstained}
    assert {"server p99 POST pods", "pod startup p99", "CPU kube-apiserver"} <= set(abstained)
    startup = abstained["pod startup p99"]
    assert startup.kind == "cpu" and startup.cpu_bound and startup.fit is not None
    assert startup.text == (f"{NOT_PROJECTABLE}: fitted over CPU-bound steps (100, 250, 500 nodes: machine CPU at "
                            "or above 85 % of its 2 cores), so its growth is this machine's limit, not the control "
                            "plane's")
    projected = {p.label for p in busy.projections}
    assert {"etcd keys", "kube-apiserver RSS", "stored pods"} <= projected  # sizes and counts do not wait for CPU
    assert not projected & set(abstained)
    note = projection.cpu_note(busy)
    assert "CPU-bound on this machine" in note and "server p99 POST pods" in note and "etcd keys" not in note

    one_busy = synthetic_run([100, 250, 500], cpu_machine_avg=100.0, cpus=2)
    one_busy.steps[1].health.summary.cpu_machine_avg = 190.0
    found = project(one_busy)
    assert found.cpu_bound_nodes == [250]
    assert {a.label: a for a in found.abstained}["pod startup p99"].reason.startswith(
        "fitted over CPU-bound steps (250 nodes:")

    idle = project(synthetic_run([100, 250, 500], cpu_machine_avg=100.0, cpus=2))
    assert idle.cpu_bound_nodes == [] and not any(f.cpu_bound for f in idle.figures)
    assert "pod startup p99" in {p.label for p in idle.projections}
    assert "No measured step was CPU-bound" in projection.cpu_note(idle)
    assert "not recorded" in projection.cpu_note(project(synthetic_run([100, 250, 500])))


def test_a_figure_with_a_large_leave_one_out_error_abstains_with_it() -> None:
    run = synthetic_run([100, 250, 500, 1000])
    run.steps[-1].pod_startup.p99 = 25.0  # the last step jumps far off the others' trend
    found = project(run)
    startup = {f.label: f for f in found.figures}["pod startup p99"]
    assert isinstance(startup, Abstention) and startup.kind == "loo"
    assert startup.text.startswith(f"{NOT_PROJECTABLE}: leave-one-out error ")
    said = re.search(r"fitted without the ([0-9,]+)-node step, the other steps predict (.+) there, (.+) was measured",
                     startup.text)
    assert said is not None
    nodes = int(said.group(1).replace(",", ""))
    assert said.group(3) == projection.signed(startup.y[startup.x.index(nodes)], "s")
    assert "pod startup p99" not in {p.label for p in found.projections}
    assert "etcd keys" in {p.label for p in found.projections}  # the other figures are untouched


def test_a_figure_measured_at_too_few_steps_abstains_with_the_count() -> None:
    run = synthetic_run([100, 250, 500, 1000])
    for step in run.steps[:2]:
        step.etcd.keys_total = None
    keys = {f.label: f for f in project(run).figures}["etcd keys"]
    assert isinstance(keys, Abstention) and keys.kind == "points" and keys.fit is None
    assert keys.reason == "measured at 2 of the 4 measured scales; a fit needs 3 at different scales"


# ---- the report's Projection section ------------------------------------------------------------------------


def test_report_shows_the_projection_table_and_charts(tmp_path: Path) -> None:
    html = write_report(copy_run(SAMPLE, tmp_path / "run")).read_text(encoding="utf-8")
    section = html[html.index('<h2 id="projection">'):html.index('<h2 id="metadata">')]
    assert "A projection is an extrapolation of this run's measured steps (100, 500, 1,000 nodes)" in section
    assert "Its 95 % band is the widest of three" in section and "exceeds 50 % per doubling" in section
    assert '<table id="projection-table">' in section
    assert "at 2,500 nodes" in section and "at 7,500 nodes" in section
    for figure in ("server p99 POST pods", "pod startup p99", "etcd keys", "kube-apiserver RSS", "CPU etcd"):
        assert f"<td>{figure}</td>" in section
    # the sample's cluster-wide LIST grows with the square of its scale factor: a line through the two larger steps
    # goes below zero at the smallest, so the row says why instead of giving a number
    row = re.search(r"<tr><td>server p99 LIST pods \(cluster\)</td>.*?</tr>", section, flags=re.DOTALL).group(0)
    assert f'colspan="4">{NOT_PROJECTABLE}: leave-one-out error 109 % per doubling of nodes' in row
    assert "fitted without the 100-node step, the other steps predict −108.3 ms there, 71.0 ms was measured" in row
    assert "at 2,500 nodes" in section and "per doubling" in section
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


# ---- the projection check: coverage of the stated bands -----------------------------------------------------


def four_step_sample(folder: Path) -> Path:
    """The recorded sample with a 2,000-node step added: a copy of its 1,000-node step in which only the nodes and
    the pods doubled, so counts land on their trend and everything else falls short of it."""
    def add_step(data: dict) -> None:
        step = copy.deepcopy(data["steps"][-1])
        step.update(index=len(data["steps"]), name="2000 nodes", nodes=2000)
        step["storage_objects"].update(nodes=2000.0, pods=20025.0)
        data["steps"].append(step)

    return edited_run(SAMPLE, folder, add_step)


def test_coverage_counts_the_bands_that_held_and_leaves_out_abstentions() -> None:
    found = project(synthetic_run([100, 250, 500], project_to=[1000]))
    p, a = found.projections[0], Abstention(found.projections[1].series, found.projections[1].chart, [], [], "loo", "x")
    rows = [
        projection_check.Checked(p, 1000, measured=5.0, projected=4.0, low=3.0, high=6.0),  # held
        projection_check.Checked(p, 1000, measured=7.0, projected=4.0, low=3.0, high=6.0),  # above the band
        projection_check.Checked(p, 2000, measured=3.0, projected=4.0, low=3.0, high=6.0),  # on its edge: held
        projection_check.Checked(p, 2000, measured=None, projected=4.0, low=3.0, high=6.0),  # nothing to compare
        projection_check.Checked(a, 2000, measured=9.0),  # abstained: no band to count
    ]
    at_1000, at_2000, total = projection_check.coverage(rows)
    assert (at_1000.nodes, at_1000.given, at_1000.inside, at_1000.abstained, at_1000.unmeasured) == (1000, 2, 1, 0, 0)
    assert (at_2000.nodes, at_2000.given, at_2000.inside, at_2000.abstained, at_2000.unmeasured) == (2000, 1, 1, 1, 1)
    assert (total.nodes, total.given, total.inside, total.abstained, total.unmeasured) == (None, 3, 2, 1, 1)
    assert total.share == pytest.approx(2 / 3) and total.met is False and at_2000.met is True
    assert rows[4].in_band is None and rows[4].error is None and rows[1].error == pytest.approx(4 / 7 - 1)
    assert projection_check.coverage([])[-1].share is None


def test_projection_check_on_recorded_results(tmp_path: Path) -> None:
    run = projection_check.load_results(four_step_sample(tmp_path / "run"))
    found, rows = projection_check.compare(run, [100, 500, 1000], [2000])
    by_label = {r.figure.label: r for r in rows}
    assert by_label["stored nodes"].in_band is True and by_label["stored pods"].in_band is True
    assert by_label["stored leases.coordination.k8s.io"].in_band is False  # measured at half its trend
    listing = by_label["server p99 LIST pods (cluster)"]
    assert listing.abstained and listing.in_band is None and listing.measured == pytest.approx(0.071 * 2.9 ** 2, 1e-3)
    total = projection_check.coverage(rows)[-1]
    assert total.given == sum(1 for r in rows if r.in_band is not None)
    assert total.inside == sum(1 for r in rows if r.in_band)
    assert total.abstained == len(found.abstained) > 0

    assert projection_check.why(listing, run).startswith(f"{NOT_PROJECTABLE}: leave-one-out error 109 % per doubling")
    leases = projection_check.why(by_label["stored leases.coordination.k8s.io"], run)
    assert leases.startswith("leave-one-out error ") and "below the band" in leases


def test_projection_check_keeps_its_results_and_rechecks_them_from_the_gzip(tmp_path: Path) -> None:
    folder = four_step_sample(tmp_path / "run")
    raw = tmp_path / "raw" / "projection_check-results.json.gz"
    record = tmp_path / "sizing.json"
    steps = ["--fit-from", "100", "500", "1000", "--check-at", "2000", "--raw", str(raw), "--sizing", str(record)]
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    assert projection_check.main(["--from-results", str(folder), "--out", str(first), *steps]) == 0
    assert gzip.decompress(raw.read_bytes()) == (folder / "results.json").read_bytes()
    kept = raw.read_bytes()
    assert projection_check.main(["--from-results", str(raw), "--out", str(second), *steps]) == 0
    assert raw.read_bytes() == kept  # read, not rewritten
    memory = json.loads(record.read_text())["apiserver_memory"]  # kube-apiserver's RSS per node, for sizing
    assert memory["bytes_per_node"] > 0 and memory["command"].startswith(".venv/bin/python benchmarks/")

    def table(path: Path) -> list[str]:
        return [line for line in path.read_text().splitlines() if line.startswith("| ")]

    assert table(first) == table(second) and len(table(first)) > 20
    text = first.read_text()
    run = projection_check.load_results(raw)
    total = projection_check.coverage(projection_check.compare(run, [100, 500, 1000], [2000])[1])[-1]
    assert (f"Coverage: {total.inside} of {total.given} bands given at 2,000 nodes held the measured value "
            f"({projection.share(total.share)}; target ≥ 90 %: {'met' if total.met else 'not met'})") in text
    assert f"| all | {total.given} | {total.inside} | {projection.share(total.share)} | {total.abstained} | 0 |" in text
    row = next(line for line in table(first) if line.startswith("| server p99 LIST pods (cluster) |"))
    assert "| abstained | not projectable from these steps: leave-one-out error" in row
    assert "Abstained (not projectable from these steps): leave-one-out error beyond the bound: " in text
    assert projection_check.main(["--from-results", str(tmp_path / "missing.json.gz"), "--out", str(first),
                                  *steps]) == 2
