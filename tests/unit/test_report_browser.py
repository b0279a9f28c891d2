"""Open generated pages in headless Chromium, offline, and check the charts were drawn without errors.

Set LOADTEST_SCREENSHOT_DIR to also save a screenshot of the sample report there (report-sample.png).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtests.report.compare import compare
from loadtests.report.html import write_report
from loadtests.report.repeats import write_repeats_report
from tests.browser import Chromium, Page, find_chromium
from tests.unit.noisedata import floor_file, recorded_floor
from tests.unit.reportdata import (
    ROLLING,
    SAMPLE,
    copy_run,
    edited_run,
    repeated_run,
    scale_latencies,
    with_audit,
    with_health,
)

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (apt-get install chromium)")

DRAWN = "document.body.dataset.charts !== 'pending' && document.body.dataset.charts"


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with Chromium() as chromium:
        yield chromium


def open_page(browser: Chromium, html: Path) -> Page:
    page = browser.new_page()
    page.navigate(html.as_uri(), timeout=90)
    assert page.wait_for(DRAWN, timeout=90) == "drawn", page.errors
    return page


def assert_charts_drawn(page: Page) -> int:
    charts = page.evaluate("document.querySelectorAll('div.chart').length")
    plotted = page.evaluate("document.querySelectorAll('div.chart.js-plotly-plot').length")
    svgs = page.evaluate("document.querySelectorAll('.js-plotly-plot .main-svg').length")
    traces = page.evaluate("document.querySelectorAll('.js-plotly-plot .trace').length")
    assert charts > 0
    assert plotted == charts
    assert svgs >= charts
    assert traces >= charts
    return charts


def assert_clean(page: Page) -> None:
    assert page.errors == []
    fetched = [url for url in page.requests if not url.startswith(("file:", "data:", "about:"))]
    assert fetched == [], "the page fetched something from the network"


def test_report_draws_every_chart_offline(browser: Chromium, tmp_path: Path) -> None:
    folder = copy_run(SAMPLE, tmp_path / "run")
    page = open_page(browser, write_report(folder))
    assert assert_charts_drawn(page) == 21  # 13 across steps, 8 projections
    assert page.evaluate("document.querySelector('#verdict .label').textContent") == "PASS"
    assert_clean(page)
    shots = os.environ.get("LOADTEST_SCREENSHOT_DIR")
    if shots:
        assert page.screenshot(Path(shots) / "report-sample.png").stat().st_size > 10_000


def test_report_with_cluster_health_draws_every_chart_offline(browser: Chromium, tmp_path: Path) -> None:
    folder = edited_run(SAMPLE, tmp_path / "run", with_health(not_ready_at=1))
    page = open_page(browser, write_report(folder))
    assert assert_charts_drawn(page) == 24  # 13 across steps, one over time per step, 8 projections
    # a health chart stacks its rows on one time axis, each row with its own legend
    assert page.evaluate("document.querySelectorAll('#chart-health_1 g.infolayer > g[class^=legend]').length") == 6
    assert page.evaluate("document.querySelectorAll('#chart-health_1 .cartesianlayer .subplot').length") == 6
    assert_clean(page)


def test_a_rolling_upgrade_draws_its_timeline_with_each_instance_shaded(browser: Chromium, tmp_path: Path) -> None:
    page = open_page(browser, write_report(copy_run(ROLLING, tmp_path / "run")))
    assert_charts_drawn(page)
    assert page.evaluate("document.querySelectorAll('#chart-roll_0.js-plotly-plot').length") == 1
    bands = "document.querySelectorAll('#chart-roll_0 .shapelayer path').length"
    assert page.evaluate(bands) == 4  # both apiservers, the controller-manager and the scheduler
    text = page.evaluate("document.getElementById('roll-0').innerText")
    assert "availability" in text and "kube-apiserver-2" in text and "v1.36.3 → v1.37.2" in text
    # the recorded roll lost one probe of 1,001 (a 503 from an apiserver shutting down): under 99.5 % of seconds
    assert page.evaluate("document.querySelector('#verdict .label').textContent") == "FAIL"
    assert_clean(page)


def test_report_with_cpu_bound_projections_draws_them_offline(browser: Chromium, tmp_path: Path) -> None:
    def busy_machine(data: dict) -> None:
        with_health()(data)
        for step in data["steps"]:  # 95 % of the machine's 8 cores at every step
            step["health"]["summary"]["cpu_machine_avg"] = 760.0

    page = open_page(browser, write_report(edited_run(SAMPLE, tmp_path / "run", busy_machine)))
    assert_charts_drawn(page)
    projected = page.evaluate("document.querySelectorAll('div.chart[id^=chart-projection_].js-plotly-plot').length")
    assert projected == 3  # only sizes and counts: latencies and CPU fitted over CPU-bound steps abstain
    assert page.evaluate("document.querySelectorAll('#chart-projection_pod_startup').length") == 0
    text = page.evaluate("document.body.innerText")
    assert "not projectable from these steps: fitted over CPU-bound steps" in text
    assert "CPU-bound on this machine" in page.evaluate("document.getElementById('projection-cpu').textContent")
    assert_clean(page)


def test_compare_draws_overlaid_charts_offline(browser: Chromium, tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    b = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))
    result = compare(a, b, tmp_path / "out", noise_floor=recorded_floor(tmp_path / "noise"))
    page = open_page(browser, result.html_path)
    assert_charts_drawn(page)
    # A and B are both drawn: twice the traces of a single run, plus threshold lines
    names = page.evaluate("Array.from(document.querySelectorAll('.legendtext')).map(e => e.textContent)")
    assert "A: POST pods" in names and "B: POST pods" in names
    assert page.evaluate("document.querySelector('#verdict .label').textContent") == "REGRESSION"
    assert_clean(page)


def test_repeats_report_draws_medians_with_error_bars_offline(browser: Chromium, tmp_path: Path) -> None:
    folder = repeated_run(tmp_path / "rep", (0.97, 1.0, 1.3))
    write_report(folder / "repeat-1")
    page = open_page(browser, write_repeats_report(folder))
    assert assert_charts_drawn(page) == 13  # every chart of the run report, no projections
    assert page.evaluate("document.querySelector('#verdict .label').textContent") == "FAIL"
    # min-max of the repeats drawn around each median
    assert page.evaluate("document.querySelectorAll('#chart-pod_startup g.errorbar path').length") >= 9
    assert page.evaluate("document.querySelector('a.repeat-link').getAttribute('href')") == "repeat-1/report.html"
    assert_clean(page)


def test_driver_sees_errors_and_requests(browser: Chromium, tmp_path: Path) -> None:
    """The checks above would be vacuous if the driver missed errors: a page that misbehaves must be caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><head><link rel='icon' href='data:,'></head><body data-charts='drawn'>"
                   "<img src='http://127.0.0.1:9/x.png'>"
                   "<script>console.error('drawn badly'); throw new Error('boom');</script></body></html>")
    page = browser.new_page()
    page.navigate(bad.as_uri())
    page.wait_for("document.readyState === 'complete'")
    assert any("drawn badly" in e for e in page.errors)
    assert any("boom" in e for e in page.errors)
    assert "http://127.0.0.1:9/x.png" in page.requests


def test_report_with_audit_and_bounds_renders_them_offline(browser: Chromium, tmp_path: Path) -> None:
    def audited_and_bounded(data: dict) -> None:
        with_audit(data)
        for step in data["steps"]:
            for entry in step["server"]:
                if entry["verb"] == "POST" and entry["resource"] == "pods":
                    entry.update(p99=0.05, bounds={"p99": "<"})

    page = open_page(browser, write_report(edited_run(SAMPLE, tmp_path / "run", audited_and_bounded)))
    assert_charts_drawn(page)
    text = page.evaluate("document.body.innerText")
    assert "< 50.0 ms" in text and "Who is expensive" in text
    assert "k8s-loadtest/list_pollers 92 %" in text
    assert_clean(page)


def _mixed(data: dict) -> None:
    """Server latencies worse, client ones a little worse, pod startup and watch delay better: a comparison
    with regressions, changes within the noise and improvements at once."""
    for step in data["steps"]:
        for entry in step["server"]:
            for q in ("p50", "p90", "p99"):
                entry[q] = None if entry[q] is None else entry[q] * 1.6
        for stat in step["client"]:
            for q in ("p50_ms", "p90_ms", "p99_ms", "max_ms", "avg_ms"):
                stat[q] = None if stat[q] is None else stat[q] * 1.15
        for name in ("pod_startup", "watch_delay"):
            for q in ("p50", "p90", "p99", "max"):
                step[name][q] = None if step[name][q] is None else step[name][q] * 0.5
    data["run_id"] += "-candidate"


def _change_text(row) -> str:
    """The change column as compare.html shows it."""
    if row.change_pct is not None:
        return f"{row.change_prefix}{row.change_pct:+.1f} %"
    return "?" if row.direction == "overlap" else "—"


@pytest.mark.parametrize("role", ["A", "B"])
def test_a_report_compares_itself_with_a_picked_report_as_loadtest_compare_does(
        browser: Chromium, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str) -> None:
    monkeypatch.setenv("LOADTEST_NOISE_FLOOR", str(floor_file(tmp_path / "noise")))
    baseline = write_report(copy_run(SAMPLE, tmp_path / "a"))
    candidate = write_report(edited_run(SAMPLE, tmp_path / "b", _mixed))
    expected = compare(tmp_path / "a", tmp_path / "b", tmp_path / "out")
    statuses = {row.status for row in expected.rows}
    assert {"regression", "~", "better"} <= statuses  # the pair exercises every kind of verdict

    opened, picked = (candidate, baseline) if role == "A" else (baseline, candidate)
    page = open_page(browser, opened)
    before = page.evaluate("document.getElementById('chart-server_mutating').data.length")
    if role == "B":
        page.evaluate("document.querySelector('input[name=compare-role][value=B]').checked = true")
    page.pick_files("#compare-file", [picked])
    assert page.wait_for("document.body.dataset.compared") == "done", page.errors
    shown = page.evaluate("window.loadtestComparison")
    assert (shown["a_run_id"], shown["b_run_id"]) == (expected.a_run_id, expected.b_run_id)
    assert [(r["step_name"], r["label"], r["status"], r.get("change", "—")) for r in shown["rows"]] == [
        (row.step_name, row.label, row.status, _change_text(row) if row.compared else "—") for row in expected.rows]
    assert (shown["label"], shown["headline"]) == (expected.label, expected.headline)
    table = page.evaluate("document.querySelectorAll('#compare-rows tbody tr').length")
    assert table == len(expected.rows)
    # the other report is drawn on the page's own charts, dashed
    after = page.evaluate("document.getElementById('chart-server_mutating').data.length")
    assert after > before
    assert page.evaluate("document.getElementById('chart-server_mutating').data.slice(-1)[0].line.dash") == "dash"
    assert_clean(page)


def test_a_report_refuses_a_picked_page_of_another_plan_or_none(browser: Chromium, tmp_path: Path) -> None:
    def other_plan(data: dict) -> None:
        data["plan"]["steps"] = data["plan"]["steps"][:2]

    page = open_page(browser, write_report(copy_run(SAMPLE, tmp_path / "a")))
    page.pick_files("#compare-file", [write_report(edited_run(SAMPLE, tmp_path / "b", other_plan))])
    assert page.wait_for("document.body.dataset.compared") == "refused"
    assert "their plans differ" in page.evaluate("document.getElementById('compare-verdict').textContent")
    page.evaluate("document.getElementById('compare-force').click()")
    assert page.wait_for("document.body.dataset.compared === 'done'")
    assert "plans differ" in page.evaluate("document.getElementById('compare-result').textContent")
    stray = tmp_path / "stray.html"
    stray.write_text("<html><body>not a report</body></html>")
    page.evaluate("delete document.body.dataset.compared")
    page.pick_files("#compare-file", [stray])
    assert page.wait_for("document.body.dataset.compared") == "refused"
    assert "carries no comparison data" in page.evaluate("document.getElementById('compare-verdict').textContent")
    assert_clean(page)


def test_flow_control_per_priority_level_has_its_table(browser: Chromium, tmp_path: Path) -> None:
    """The flow-control probe's section in a table of its own, each level's flow schemas under it, and who the
    run's clients were beside it; a step without it says "not measured"."""
    def flooded(data: dict) -> None:
        data["steps"][-1]["flow_control"] = [
            {"priority_level": "global-default", "dispatched": 5400, "queued": 812, "queued_over_s": 0.005,
             "rejected": 37, "waited": 5437, "wait_p99_s": 1.25, "wait_bound": "", "in_queue_at_close": 12,
             "flow_schemas": [{"flow_schema": "global-default", "dispatched": 5400, "queued": 812, "rejected": 37}]},
            {"priority_level": "exempt", "dispatched": 900}]  # as files written before flow schemas were kept
        data["plan"].setdefault("target", {})["identities"] = "production"
        data["clients"] = [
            {"client": "harness", "user": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"],
             "flow_schema": "exempt", "priority_level": "exempt", "exempt": True},
            {"client": "load", "user": "loadtest-load", "groups": ["system:authenticated"],
             "flow_schema": "global-default", "priority_level": "global-default", "exempt": False},
            {"client": "nodes joining", "user": "kwok-controller", "groups": ["system:nodes", "system:authenticated"],
             "flow_schema": "system-nodes", "priority_level": "system", "exempt": False}]

    page = open_page(browser, write_report(edited_run(SAMPLE, tmp_path / "run", flooded)))
    text = page.evaluate("document.body.innerText")
    assert "Flow control: who waited, who was turned away" in text
    rows = page.evaluate("[...document.querySelectorAll('table.flow-control tbody tr:not(.flow-schema)')]"
                         ".map(r => r.innerText)")
    assert len(rows) == 2 and rows[0].split("\t")[:4] == ["global-default", "5,400", "812 (> 5.0 ms)", "37"], rows
    schemas = page.evaluate("[...document.querySelectorAll('table.flow-control tr.flow-schema')].map(r => r.innerText)")
    assert len(schemas) == 1 and schemas[0].split("\t")[1:4] == ["5,400", "812", "37"], schemas
    assert "Not measured for this step" in text  # the earlier steps carry no flow-control section
    assert "Who the clients are to the apiserver" in text and 'identities "production"' in text
    last = "[...document.querySelectorAll('table.flow-clients')].pop()"  # the flooded step's
    clients = page.evaluate(f"[...{last}.querySelectorAll('tbody tr')].map(r => r.innerText.split('\\t'))")
    assert [c[0] for c in clients] == ["harness", "load", "nodes joining"], clients
    assert clients[1][3:8] == ["global-default", "global-default", "5,400", "812", "37"], clients
    assert "exempt: never queued" in clients[0][4] and clients[0][5] == "not kept per flow schema", clients
    assert clients[2][5] == "none in this window", clients  # its level dispatched nothing in this step
    assert_clean(page)


def test_a_soak_page_draws_a_chart_per_measured_series(browser: Chromium, tmp_path: Path) -> None:
    from tests.unit.test_soak import leak_rows, write_soak

    write_soak(tmp_path, leak_rows())
    write_report(tmp_path)
    page = open_page(browser, tmp_path / "soak.html")
    assert assert_charts_drawn(page) == 2  # the series never measured has no chart
    assert page.evaluate("document.querySelector('.banner .label').textContent") == "GROWS"
    assert_clean(page)
