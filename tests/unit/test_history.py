"""`loadtest history`: ten recorded runs with seeded noise on every figure, a step planted in one figure, and
Apache Otava's own change-point code (no stand-in) finding it; bounds, the gate, the page, the command line."""

from __future__ import annotations

import random
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtests.analysis.history import MIN_MAGNITUDE, History, change_points, history, load_points
from loadtests.analysis.rules import regressed
from loadtests.cli.main import build_parser
from loadtests.config.plan import REGRESSION_DEFAULTS
from loadtests.errors import CompareError, SetupError
from loadtests.report.history import HISTORY_FILE, HISTORY_JUNIT_FILE, write_history
from loadtests.report.html import write_report
from loadtests.report.repeats import write_repeats_report
from loadtests.results.embedded import embedded
from tests.browser import Chromium, find_chromium
from tests.cli import error_lines, loadtest
from tests.unit.reportdata import SAMPLE, edited_run, repeated_run

RUNS = 10
NOISE = 0.02  # every figure of every run moves by up to ±2 %
SEED = 1
PLANTED = "server p99 LIST pods (cluster)"  # the one figure a step is planted in, at every step
OLD, NEW = "v1.36.3", "v1.37.2"  # the runs before the planted step ran on OLD, those from it on NEW


def _jitter(data: dict[str, Any], rng: random.Random) -> None:
    """Every figure compare weighs moved by up to ±NOISE; a value that is only a histogram bound stays the bound."""
    def moved(value: float | None) -> float | None:
        return None if value is None else value * (1 + rng.uniform(-NOISE, NOISE))

    for step in data["steps"]:
        for entry in step["server"]:
            for q in ("p50", "p90", "p99"):
                if q not in (entry.get("bounds") or {}):
                    entry[q] = moved(entry[q])
        for stat in step["client"]:
            for q in ("p50_ms", "p90_ms", "p99_ms"):
                stat[q] = moved(stat[q])
        for name in ("pod_startup", "watch_delay"):
            for q in ("p50", "p90", "p99"):
                step[name][q] = moved(step[name][q])
        for key in ("db_size_bytes", "db_size_in_use_bytes", "keys_total"):
            step["etcd"][key] = moved(step["etcd"][key])
        for process in step["processes"]:
            process["cpu_percent"] = moved(process["cpu_percent"])
            process["rss_max_bytes"] = moved(process["rss_max_bytes"])
        for code in step["requests_by_code"]:
            step["requests_by_code"][code] = moved(step["requests_by_code"][code])


def _scale_planted(data: dict[str, Any], factor: float) -> None:
    for step in data["steps"]:
        for entry in step["server"]:
            if (entry["verb"], entry["resource"], entry["scope"]) == ("LIST", "pods", "cluster"):
                entry["p99"] *= factor


def _run(k: int, at: int | None, factor: float, seed: int,
         edit: Callable[[dict[str, Any], int], None] | None) -> Callable[[dict[str, Any]], None]:
    """Run k (1-based) of the history: its own id, a day after the one before, noise; the planted step from run
    `at` on."""
    def change(data: dict[str, Any]) -> None:
        data["run_id"] = f"run-{k:02d}"
        data["started_at"] = f"2026-01-{k:02d}T10:00:00.000+00:00"
        data["environment"]["versions"]["kubernetes"] = NEW if at is not None and k >= at else OLD
        if edit is not None:
            edit(data, k)
        _jitter(data, random.Random(seed * 1000 + k))
        if at is not None and k >= at:
            _scale_planted(data, factor)
    return change


def runs(folder: Path, at: int | None = None, factor: float = 1.6, seed: int = SEED,
         edit: Callable[[dict[str, Any], int], None] | None = None) -> list[Path]:
    """RUNS run folders of the sample, named newest first (the history orders them by start time itself)."""
    return [edited_run(SAMPLE, folder / f"run-{k:02d}", _run(k, at, factor, seed, edit)) for k in range(RUNS, 0, -1)]


def found(result: History) -> list[tuple[int, str, int]]:
    """Every change point as (step index, figure, run number from 1)."""
    return sorted((t.step_index, t.label, c.position + 1) for t, c in result.changes)


def of(folders: list[Path], **options: Any) -> History:
    points, notes = load_points(folders)
    return history(points, notes=notes, **options)


def test_a_step_in_one_figure_is_found_at_its_run_and_nowhere_else(tmp_path: Path) -> None:
    result = of(runs(tmp_path, at=7))
    assert [p.title for p in result.points] == [f"run-{k:02d}" for k in range(1, RUNS + 1)]
    assert len(result.analysed) == 87  # 29 compared figures at each of the 3 steps
    assert found(result) == [(0, PLANTED, 7), (1, PLANTED, 7), (2, PLANTED, 7)]
    by_step = {t.step_index: c for t, c in result.changes}
    for change in by_step.values():
        assert change.before == 5 and change.pvalue < 0.001  # run 6 before it, run 7 the first after
        assert change.rel_change == pytest.approx(0.6, abs=0.05) and change.direction == "up"
        assert not change.latest and not change.bounded
    # at 100 nodes +60 % is 71 -> 114 ms: past 25 % but not past 50 ms, a change within the margin; above, regressions
    assert by_step[0].status == "worse, within margin" and not by_step[0].regression
    assert by_step[1].regression and by_step[2].regression
    assert result.latest_regressions == [] and result.label == "CHANGES"
    track = next(t for t, c in result.changes if t.step_index == 2)
    text = result.describe(track, by_step[2])
    assert re.match(r"\d+\.\d ms → \d+\.\d ms \(\+(59|6\d) %, p<0\.001\) from run run-07", text), text
    assert f"from run run-07 ({NEW}, 2026-01-07 10:00), after run run-06 ({OLD}, 2026-01-06 10:00)" in text


def test_without_a_change_no_figure_has_a_change_point(tmp_path: Path) -> None:
    result = of(runs(tmp_path))
    assert found(result) == []
    assert result.label == "STEADY" and result.headline == "no change point in 87 figure series over 10 runs"


def test_noise_alone_would_show_changes_without_the_smallest_change(tmp_path: Path) -> None:
    """Why the history reports no change under MIN_MAGNITUDE: Hunter finds noise-sized splits in short series."""
    folders = runs(tmp_path)
    assert found(of(folders)) == []
    noisy = of(folders, min_magnitude=0.0)
    assert noisy.changes and all(abs(c.rel_change) < MIN_MAGNITUDE and not c.regression for _, c in noisy.changes)


@pytest.mark.parametrize(("factor", "code", "status"), [(1.6, 1, "regression"), (0.6, 0, "better"), (1.0, 0, "")])
def test_the_gate_fails_only_when_the_latest_run_starts_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                     factor: float, code: int, status: str) -> None:
    folders = runs(tmp_path / "runs", at=RUNS, factor=factor)
    args = build_parser().parse_args(["history", *map(str, folders), "--out", str(tmp_path / "out"), "--gate"])
    assert args.func(args) == code
    out = capsys.readouterr().out.splitlines()
    result = of(folders)
    if factor == 1.0:
        assert found(result) == [] and "no change point in 87 figure series over 10 runs" in out
    else:
        assert found(result) == [(0, PLANTED, RUNS), (1, PLANTED, RUNS), (2, PLANTED, RUNS)]
        assert all(c.latest for _, c in result.changes)
        assert {c.status for t, c in result.changes if t.step_index > 0} == {status}
    regressions = [line for line in out if line.startswith("REGRESSION  ")]
    if code:
        assert [line.split(":")[0] for line in regressions] == ["REGRESSION  step 500 nodes",
                                                                 "REGRESSION  step 1000 nodes"]
        assert all(f"{PLANTED}: " in line and "the latest: worse by > 25 % and > 50 ms" in line
                   for line in regressions)
        assert "from run run-10 (v1.37.2, 2026-01-10 10:00)" in regressions[0]
    else:
        assert regressions == []
    assert f"history: {tmp_path / 'out' / HISTORY_FILE}" in out
    root = ET.parse(tmp_path / "out" / HISTORY_JUNIT_FILE).getroot()
    assert root.get("failures") == str(2 if code else 0)
    # without --gate the same history exits 0: it shows, it does not judge
    args = build_parser().parse_args(["history", *map(str, folders), "--out", str(tmp_path / "out2")])
    assert args.func(args) == 0


def test_otava_finds_a_change_with_one_run_after_it() -> None:
    rng = random.Random(3)
    series = [1 + rng.uniform(-NOISE, NOISE) for _ in range(9)] + [1.6]
    (change,) = change_points(series)
    assert change.index == 9 and change.pvalue < 0.001 and change.mean_2 == pytest.approx(1.6)


def _post_pods(value: float, bound: str = "") -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        for entry in data["steps"][0]["server"]:
            if (entry["verb"], entry["resource"], entry.get("subresource", "")) == ("POST", "pods", ""):
                entry.update(p99=value, bounds={"p99": bound} if bound else {})
    return edit


def _switch(before: Callable[[dict[str, Any]], None], after: Callable[[dict[str, Any]], None],
            at: int = 7) -> Callable[[dict[str, Any], int], None]:
    def edit(data: dict[str, Any], k: int) -> None:
        (after if k >= at else before)(data)
    return edit


def test_a_change_into_the_first_bucket_is_never_a_regression(tmp_path: Path) -> None:
    strict = {"latency_abs_s": 0.005}
    # 30 ms, then "under 50 ms": the values alone read +67 %, which the strict rule would call a regression ...
    assert regressed("latency", 0.03, 0.05, {**REGRESSION_DEFAULTS, **strict})
    folders = runs(tmp_path, edit=_switch(_post_pods(0.03), _post_pods(0.05, "<")))
    result = of(folders, thresholds=strict)
    (track, change), = [(t, c) for t, c in result.changes if t.label == "server p99 POST pods"]
    # ... but all the histogram says after it is "at most 50 ms": it may not have moved up at all
    assert change.position + 1 == 7 and change.bounded and change.direction == "overlap"
    assert not change.regression and change.status == "within a histogram bound" and change.change_text == "?"
    assert track.bounded_positions == [6, 7, 8, 9] and track.value_text(9) == "< 50.0 ms"
    assert [t.label for t in result.bounded_tracks] == ["server p99 POST pods"]


def test_a_change_out_of_the_first_bucket_is_judged_at_the_bounds_worst(tmp_path: Path) -> None:
    # "under 50 ms", then 200 ms: at least +300 %, past the rule however low the first runs truly were
    folders = runs(tmp_path, edit=_switch(_post_pods(0.05, "<"), _post_pods(0.2)))
    result = of(folders)
    (change,) = [c for t, c in result.changes if t.label == "server p99 POST pods"]
    assert change.regression and change.direction == "up" and re.fullmatch(r"≥ \+(29\d|30\d) %", change.change_text)
    assert change.before_low == 0.0 and change.before_high == pytest.approx(0.05)


def test_a_folder_of_repeats_is_one_point_its_median(tmp_path: Path) -> None:
    folders = runs(tmp_path / "runs")[1:]  # runs 9 down to 1

    def latest(data: dict[str, Any]) -> None:
        data["started_at"] = "2026-01-10T10:00:00.000+00:00"
        _scale_planted(data, 1.6)

    repeats = repeated_run(tmp_path / "latest", (0.98, 1.0, 1.02), latest)
    result = of([repeats, *folders])
    assert result.latest.n == 3 and result.latest.name == str(repeats)
    track = next(t for t in result.tracks if t.step_index == 2 and t.label == PLANTED)
    assert track.values[-1] == pytest.approx(0.5971 * 1.6)  # the median of 0.98, 1.0, 1.02 times the planted
    assert found(result) == [(0, PLANTED, RUNS), (1, PLANTED, RUNS), (2, PLANTED, RUNS)]


def test_report_pages_stand_for_the_runs_they_carry(tmp_path: Path) -> None:
    folders = runs(tmp_path / "runs", at=RUNS)
    latest = write_report(folders[0])  # run 10's report.html, the only copy of it a CI job may have kept
    (folders[0] / "results.json").unlink()
    from_pages = of([latest, *folders[1:]])
    assert from_pages.latest.title == "run-10" and from_pages.latest.name == str(latest)
    assert found(from_pages) == [(0, PLANTED, RUNS), (1, PLANTED, RUNS), (2, PLANTED, RUNS)]
    # a report of repeats is one point too: its repeats' median
    def newest(data: dict[str, Any]) -> None:
        data["started_at"] = "2026-01-11T10:00:00.000+00:00"
        _scale_planted(data, 1.6)

    repeats = write_repeats_report(repeated_run(tmp_path / "repeats", (0.98, 1.0, 1.02), newest))
    with_repeats = of([*folders[1:], repeats])
    assert with_repeats.latest.n == 3 and with_repeats.latest.name == str(repeats)
    assert found(with_repeats) == [(0, PLANTED, RUNS), (1, PLANTED, RUNS), (2, PLANTED, RUNS)]
    # a history page carries its runs as well, but is no run's report: it is refused in one line
    html_path, _ = write_history(with_repeats, tmp_path / "out")
    kind, carried = embedded(html_path)
    assert kind == "history" and len(carried) == RUNS - 1 + 3
    bare = tmp_path / "bare.html"
    bare.write_text("<html><body>no results here</body></html>")
    for page, expected in ((html_path, "is a history page, not a run's report"), (bare, "carries no results")):
        with pytest.raises(CompareError, match=expected) as refused:
            load_points([*folders[1:4], page])
        assert "\n" not in str(refused.value)


def test_what_cannot_be_a_history_is_refused_in_one_line(tmp_path: Path) -> None:
    folders = runs(tmp_path / "runs")
    refusals = {
        "needs 3 or more": folders[:2],
        "no results.json in": [*folders[:3], tmp_path / "nowhere"],
        "named twice": [*folders[:3], folders[0]],
    }
    text = tmp_path / "notes.txt"
    text.write_text("not results")
    refusals["not JSON"] = [*folders[:3], text]
    for expected, named in refusals.items():
        with pytest.raises(CompareError, match=expected) as refused:
            load_points(named)
        assert "\n" not in str(refused.value)

    def other_plan(data: dict[str, Any], k: int) -> None:
        if k == RUNS:
            data["plan"]["load"]["pod_churn"]["rate"] = 10.0

    mixed = runs(tmp_path / "mixed", edit=other_plan)
    with pytest.raises(CompareError, match="different plans.*--force"):
        load_points(mixed)
    points, notes = load_points(mixed, force=True)
    assert len(points) == RUNS and any("forced" in note for note in notes)
    with pytest.raises(CompareError, match="max-pvalue must be between 0 and 1"):
        history(points, max_pvalue=5)
    with pytest.raises(CompareError, match="unknown key 'latency'"):
        history(points, thresholds={"latency": 10})


def test_without_otava_the_history_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "otava.analysis", None)  # import otava.analysis now raises ImportError
    with pytest.raises(SetupError, match=r"pip install --no-deps apache-otava==0\.8\.0") as refused:
        change_points([1.0, 1.0, 2.0])
    assert "\n" not in str(refused.value)


def test_the_page_and_junit_say_what_was_found(tmp_path: Path) -> None:
    folders = runs(tmp_path / "runs", at=7, edit=_switch(_post_pods(0.05, "<"), _post_pods(0.05, "<")))
    result = of(folders)
    html_path, junit_path = write_history(result, tmp_path / "out")
    html = html_path.read_text(encoding="utf-8")
    assert html.count('<script id="plotly-js">') == 1 and ">CHANGES<" in html
    assert html.count("<tr class=\"bad\">") == 2 and html.count("<tr class=\"warn\">") == 1  # 2 regressions, 1 change
    assert "Regressions earlier runs started" in html and "Regressions the latest run starts" not in html
    assert "step 100 nodes: server p99 POST pods: 10 of 10 runs give only a histogram bound (&lt; 50.0 ms" in html
    assert "E-divisive" in html and "Hunter" in html and f"{OLD}\\u003cbr\\u003e01-06" in html
    # a chart per compared figure, its change points drawn as vertical lines
    assert html.count('class="chart" id="chart-history-') == 29
    root = ET.parse(junit_path).getroot()
    assert root.get("failures") == "0" and int(root.get("tests")) == 87 + 1
    case = root.find(".//testsuite[@name='step 2: 1000 nodes']/testcase[@name='server p99 LIST pods (cluster)']")
    assert "regression: " in case.find("system-out").text


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with Chromium() as browser:
        yield browser


def test_the_page_draws_every_chart_and_marks_the_change_offline(chromium: Chromium, tmp_path: Path) -> None:
    html_path, _ = write_history(of(runs(tmp_path / "runs", at=7)), tmp_path / "out")
    page = chromium.new_page()
    page.navigate(html_path.as_uri(), timeout=90)
    assert page.wait_for("document.body.dataset.charts !== 'pending' && document.body.dataset.charts",
                         timeout=90) == "drawn", page.errors
    assert page.evaluate("document.querySelectorAll('div.chart').length") == 29
    assert page.evaluate("document.querySelectorAll('div.chart.js-plotly-plot').length") == 29
    assert page.evaluate("document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length") >= 29 * 3
    marked = page.evaluate("Array.from(document.querySelectorAll('div.chart.js-plotly-plot'))"
                           ".filter(e => e.querySelectorAll('.shapelayer path').length).map(e => e.id)")
    planted = page.evaluate("Array.from(document.querySelectorAll('.panel')).filter(p => p.querySelector('h3')"
                            f".textContent.startsWith('{PLANTED} ·')).map(p => p.querySelector('div.chart').id)")
    assert marked == planted and len(planted) == 1
    assert page.evaluate(f"document.querySelectorAll('#{planted[0]} .shapelayer path').length") == 3
    assert page.evaluate("document.querySelector('#verdict .label').textContent") == "CHANGES"
    assert page.errors == []
    fetched = [url for url in page.requests if not url.startswith(("file:", "data:", "about:"))]
    assert fetched == [], "the page fetched something from the network"


def test_the_command_gates_on_the_latest_run(tmp_path: Path) -> None:
    regressed_now = runs(tmp_path / "now", at=RUNS)
    gated = loadtest("history", *map(str, regressed_now), "--out", str(tmp_path / "out"), "--gate")
    assert gated.returncode == 1, gated.stdout + gated.stderr
    lines = gated.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("REGRESSION")] == [
        "REGRESSION  step 500 nodes", "REGRESSION  step 1000 nodes"]
    assert any(line.startswith("CHANGED     step 100 nodes: server p99 LIST pods (cluster)") for line in lines)
    assert f"history: {tmp_path / 'out' / HISTORY_FILE}" in lines and (tmp_path / "out" / HISTORY_JUNIT_FILE).is_file()
    steady = loadtest("history", *map(str, runs(tmp_path / "steady")), "--out", str(tmp_path / "out2"), "--gate")
    assert steady.returncode == 0 and "no change point in 87 figure series over 10 runs" in steady.stdout
    alone = loadtest("history", str(regressed_now[0]), "--out", str(tmp_path / "out3"))
    assert alone.returncode == 2 and len(error_lines(alone)) == 1 and "needs 3 or more" in alone.stderr


def test_a_regression_the_latest_run_confirms_is_gated_where_otava_places_it(tmp_path: Path) -> None:
    """A run a little high (within the margin) just before a run far higher: the history without the latest run
    shows no regression, the history with it may place the step at the run before; either way the latest run is
    what made it a regression, so the gate fails on it, and a history that already showed it does not again."""
    def ahead(data: dict[str, Any], k: int) -> None:
        if k == RUNS - 1:
            _scale_planted(data, 1.15)

    result = of(runs(tmp_path / "a", at=RUNS, factor=1.6, edit=ahead))
    gated = [(t.step_index, c.position + 1) for t, c in result.latest_regressions]
    assert {step for step, _ in gated} == {1, 2} and all(run in (RUNS - 1, RUNS) for _, run in gated)
    # a step two runs back, already a regression when the run before the latest was the latest: not gated again
    settled = of(runs(tmp_path / "b", at=RUNS - 1, factor=1.6))
    assert settled.regressions and settled.latest_regressions == []
