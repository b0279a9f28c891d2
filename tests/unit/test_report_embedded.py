"""Every report page carries the results it was built from: the HTML alone is enough to compare, to put in a
history, or to rebuild its run folder. Secrets stay out, and a page that carries none is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtests import results
from loadtests.analysis.samples import load_side
from loadtests.errors import CompareError, UnreadableFile
from loadtests.report.compare import compare
from loadtests.report.html import write_report
from loadtests.report.repeats import write_repeats_report
from loadtests.results.embedded import EMBEDDED_ID, embedded, runs_from_html
from tests.unit.noisedata import recorded_floor
from tests.unit.reportdata import SAMPLE, copy_run, edited_run, repeated_run, scale_latencies


def _same(a: results.RunResult, b: results.RunResult) -> bool:
    return json.dumps(results.to_dict(a), sort_keys=True) == json.dumps(results.to_dict(b), sort_keys=True)


def test_a_run_report_carries_its_results_whole(tmp_path: Path) -> None:
    folder = copy_run(SAMPLE, tmp_path / "run")
    page = write_report(folder)
    kind, runs = embedded(page)
    assert kind == "run" and [name for name, _ in runs_from_html(page)] == [""]
    assert _same(runs_from_html(page)[0][1], results.load(folder))
    assert len(runs) == 1


def test_secrets_stay_out_of_the_carried_results(tmp_path: Path) -> None:
    def secret(data: dict) -> None:
        data["environment"]["target"] = {"kind": "existing", "bearer_token": "s3cr3t-value", "server": "x"}

    page = write_report(edited_run(SAMPLE, tmp_path / "run", secret))
    carried = runs_from_html(page)[0][1]
    assert carried.environment["target"] == {"kind": "existing", "server": "x"}
    assert "s3cr3t-value" not in page.read_text()


def test_a_report_of_repeats_carries_every_repeat(tmp_path: Path) -> None:
    folder = repeated_run(tmp_path / "rep", (0.9, 1.0, 1.1))
    page = write_repeats_report(folder)
    carried = runs_from_html(page)
    assert [name for name, _ in carried] == ["repeat-1", "repeat-2", "repeat-3"]
    assert all(_same(run, results.load(folder / name)) for name, run in carried)
    side = load_side(page, "A")
    assert side.n == 3 and [p.name for p in side.folders] == [f"report.html#repeat-{k}" for k in (1, 2, 3)]


def test_comparing_pages_gives_what_comparing_their_folders_gives(tmp_path: Path) -> None:
    floor = recorded_floor(tmp_path / "noise")
    a = copy_run(SAMPLE, tmp_path / "a")
    b = edited_run(SAMPLE, tmp_path / "b", scale_latencies(1.6))
    by_folder = compare(a, b, tmp_path / "folders", noise_floor=floor)
    by_page = compare(write_report(a), write_report(b), tmp_path / "pages", noise_floor=floor)
    assert by_folder.regressions  # the comparison decides something that could differ
    assert [(r.step_index, r.label, r.status, r.a, r.b, r.change_pct) for r in by_page.rows] == [
        (r.step_index, r.label, r.status, r.a, r.b, r.change_pct) for r in by_folder.rows]
    assert (by_page.headline, by_page.noise, by_page.label) == (by_folder.headline, by_folder.noise, by_folder.label)
    kind, runs = embedded(by_page.html_path)  # the comparison carries both sides too
    assert kind == "compare" and [r.name for r in runs] == ["A/report.html", "B/report.html"]


def test_pages_that_cannot_stand_for_runs_are_refused_in_one_line(tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    comparison = compare(a, a, tmp_path / "out").html_path
    with pytest.raises(CompareError, match="is a compare page, not a run's report"):
        load_side(comparison, "A")
    old = tmp_path / "old.html"
    old.write_text("<html><body>a report of an older version</body></html>")
    with pytest.raises(CompareError, match="carries no results"):
        load_side(old, "A")
    html = write_report(a).read_text()
    cut = tmp_path / "cut.html"
    cut.write_text(html[:html.index(EMBEDDED_ID) + 200])  # copied half-way through its data
    with pytest.raises(UnreadableFile, match="cut short or edited"):
        runs_from_html(cut)
