"""`loadtest soak` around its sampler: bad input refused in one line before anything starts, the series on disk
as they grow (a torn last line lost, nothing else), the soak page and JUnit built from them at any time, the exit
code through the run's verdicts, and what the sampler reads off a /metrics page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtests import results
from loadtests.analysis.metrics import Snapshot
from loadtests.analysis.soak import judge_folder
from loadtests.cli import run as cli_run
from loadtests.cli.main import main
from loadtests.config import plan as plan_mod
from loadtests.config.plan import soak_plan
from loadtests.config.soak import SoakSettings, asked, settings, short_note
from loadtests.errors import EXIT_BAD_INPUT, EXIT_PASSED, EXIT_SLO_FAILED, PlanError
from loadtests.measure.soak import page_figures
from loadtests.report.html import write_report
from loadtests.results.soak import SoakMeta, SoakSample, load_samples, sample_log, write_meta


@pytest.fixture()
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that would start is a failure of the test: every refusal comes before it."""
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a run was started")

    monkeypatch.setattr(cli_run, "execute", refuse)
    monkeypatch.setattr("loadtests.binaries.cache.find", lambda version: None)


@pytest.mark.parametrize(("flags", "said"), [
    (["--hours", "nan"], "positive finite number"),
    (["--hours", "inf"], "positive finite number"),
    (["--hours", "0"], "positive finite number"),
    (["--hours", "-2"], "positive finite number"),
    (["--hours", "soon"], "a number of hours"),
    (["--hours", "1", "--interval-s", "0.5"], "at least 1 s"),
    (["--hours", "0.0001", "--interval-s", "1"], "shorter than two samples"),
])
def test_bad_input_is_one_line_and_starts_nothing(flags: list[str], said: str, nothing_starts: None,
                                                   capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["soak", "--plan", "smoke", "--out", str(tmp_path / "out"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_BAD_INPUT and len(err) == 1 and said in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_soak_beyond_the_machine_is_one_line_and_starts_nothing(nothing_starts: None, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "huge.yaml"
    plan.write_text("name: huge\ntarget: {kind: local}\nsteps: [{nodes: 200000, pods_per_node: 30}]\n"
                    "load: {scenarios: {}}\n")
    code = main(["soak", "--plan", str(plan), "--hours", "2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_BAD_INPUT and len(err) == 1 and "beyond this machine" in err[0], err
    assert not (tmp_path / "out").exists()


def test_the_soak_plan_is_one_step_held_for_its_hours() -> None:
    plan = plan_mod.load(plan_mod.PLANS_DIR / "smoke.yaml")
    soaked = soak_plan(plan, settings(2, 30, plan.steps[1].name))
    assert [s.nodes for s in soaked.steps] == [20] and soaked.steps[0].duration_s == 7200
    assert plan.steps[1].duration_s == 20  # the plan itself is left as it was
    with pytest.raises(PlanError, match="no step is named 'nope'"):
        soak_plan(plan, settings(1, 30, "nope"))


def test_a_soak_shorter_than_an_hour_is_said_to_be_short() -> None:
    assert "45 min is shorter than an hour" in (short_note(settings(0.75, 30)) or "")
    assert short_note(settings(1, 30)) is None and short_note(settings(2, 30)) is None


def soak_section_plan(tmp_path: Path, soak: str) -> Path:
    plan = tmp_path / "soaked.yaml"
    plan.write_text("name: soaked\ntarget: {kind: local}\nsteps: [{nodes: 3, name: small}, {nodes: 5, name: big}]\n"
                    f"load: {{scenarios: {{}}}}\nsoak: {soak}\n")
    return plan


def test_a_plan_says_its_soak_and_flags_override_it(tmp_path: Path) -> None:
    plan = plan_mod.load(soak_section_plan(tmp_path, "{hours: 2, interval_s: 10, step: big}"))
    assert plan.soak == SoakSettings(2.0, 10.0, "big")
    assert asked(plan.soak) == SoakSettings(2.0, 10.0, "big")
    assert asked(plan.soak, 0.5, None, "small") == SoakSettings(0.5, 10.0, "small")
    assert asked(None, 1.0) == SoakSettings(1.0, 30.0, "")
    with pytest.raises(PlanError, match="give --hours H, or a `soak:` section"):
        asked(None)
    assert "soak" not in plan_mod.load(plan_mod.PLANS_DIR / "smoke.yaml").to_dict()  # digests of plans unchanged


@pytest.mark.parametrize(("section", "said"), [
    ("{interval_s: 10}", "soak.hours: is needed"),
    ("{hours: soon}", "soak.hours: must be a number"),
    ("{hours: 0}", "positive finite number"),
    ("{hours: 1, interval_s: 0.5}", "at least 1 s"),
    ("{hours: 1, step: huge}", "soak.step: no step is named 'huge'"),
    ("{hours: 1, minutes: 3}", "soak.minutes: unknown field"),
])
def test_a_bad_soak_section_is_one_line_and_starts_nothing(section: str, said: str, nothing_starts: None,
                                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["soak", "--plan", str(soak_section_plan(tmp_path, section)), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_BAD_INPUT and len(err) == 1 and said in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_soak_without_hours_anywhere_is_one_line(nothing_starts: None, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["soak", "--plan", "smoke", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_BAD_INPUT and len(err) == 1 and "needs its hours" in err[0], err


def write_soak(folder: Path, rows: list[dict[str, float | None]], interval_s: float = 30.0) -> None:
    """A soak folder as the sampler leaves it: results.json, soak.json and one line per sample."""
    run = results.RunResult(run_id=folder.name, plan={"name": "soak"}, environment={})
    run.status = "complete"
    results.save(run, folder)
    units = {name: "bytes" if name.endswith("_bytes") else "count" for row in rows for name in row}
    write_meta(folder, SoakMeta(folder.name, "3 nodes", 3, 1.0, interval_s, memory_limit_bytes=8e9, units=units))
    log = sample_log(folder)
    for i, row in enumerate(rows):
        log.append(SoakSample(i * interval_s, "2026-01-01T00:00:00Z", row))
    log.close()


def leak_rows(n: int = 60) -> list[dict[str, float | None]]:
    return [{"etcd.db_size_bytes": 1e6 + 5e4 * i + (i % 3) * 1e3, "kube-apiserver.open_fds": 100.0,
             "kube-apiserver.watch_cache_capacity": None} for i in range(n)]


def test_a_killed_soak_keeps_every_whole_sample(tmp_path: Path) -> None:
    write_soak(tmp_path, leak_rows(10))
    with (tmp_path / "soak" / "samples.jsonl").open("a") as torn:
        torn.write('{"t_s": 300.0, "at": "2026-01-01T00:05:00Z", "values": {"etcd.db_')  # killed mid-write
    assert [s.t_s for s in load_samples(tmp_path)] == [i * 30.0 for i in range(10)]


def test_the_report_is_built_from_what_is_on_disk(tmp_path: Path) -> None:
    write_soak(tmp_path, leak_rows())
    write_report(tmp_path)
    page = (tmp_path / "soak.html").read_text()
    assert "etcd.db_size_bytes: grows" in page and "What grew first" in page and "not measured" in page
    junit = (tmp_path / "junit.xml").read_text()
    assert 'name="etcd.db_size_bytes"' in junit and junit.count("<failure") == 1
    assert '<skipped message="not measured"' in junit


def test_a_growing_series_fails_the_run_through_its_verdicts(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    write_soak(tmp_path, leak_rows())
    run, found = results.load(tmp_path), judge_folder(tmp_path)
    assert found is not None
    assert cli_run.verdict_code(run, True, found) == EXIT_SLO_FAILED
    out = capsys.readouterr().out
    assert "GROWS       etcd.db_size_bytes: grows" in out and "; failed: etcd.db_size_bytes grows" in out
    assert cli_run.verdict_code(run, False, found) == EXIT_PASSED  # --no-gate


APISERVER_PAGE = """\
process_resident_memory_bytes 3e8
go_memstats_heap_inuse_bytes 1.5e8
go_goroutines 2500
process_open_fds 101
apiserver_resource_objects{{group="",resource="configmaps"}} {objects}
apiserver_request_sli_duration_seconds_bucket{{verb="LIST",resource="pods",le="0.05"}} {fast}
apiserver_request_sli_duration_seconds_bucket{{verb="LIST",resource="pods",le="0.1"}} {medium}
apiserver_request_sli_duration_seconds_bucket{{verb="LIST",resource="pods",le="+Inf"}} {medium}
apiserver_request_sli_duration_seconds_sum{{verb="LIST",resource="pods"}} 1
apiserver_request_sli_duration_seconds_count{{verb="LIST",resource="pods"}} {medium}
apiserver_request_total{{code="200",verb="LIST"}} 100
apiserver_request_total{{code="429",verb="POST"}} {throttled}
apiserver_request_total{{code="503",verb="GET"}} 2
"""


def test_the_apiserver_page_gives_gauges_and_each_intervals_figures() -> None:
    first = Snapshot.parse(APISERVER_PAGE.format(objects=10, fast=100, medium=100, throttled=1))
    second = Snapshot.parse(APISERVER_PAGE.format(objects=30, fast=150, medium=200, throttled=4))
    bounds: dict[str, str] = {}
    found = page_figures("kube-apiserver", first, second, bounds)
    assert found["kube-apiserver.heap_inuse_bytes"] == 1.5e8 and found["kube-apiserver.objects"] == 30
    assert found["kube-apiserver.watch_cache_capacity"] is None  # v1.37 has no such gauge: not measured, never 0
    assert found["kube-apiserver.p99_read_s"] == pytest.approx(0.05 + 0.05 * (99 - 50) / 50)  # 50 of 100 in 0.05-0.1
    assert found["kube-apiserver.p99_write_s"] is None  # no write in the interval
    assert found["kube-apiserver.requests_429"] == 3 and found["kube-apiserver.requests_5xx"] == 0
    assert "kube-apiserver.p99_read_s" not in bounds
    opening = page_figures("kube-apiserver", None, first, {})
    assert "kube-apiserver.p99_read_s" not in opening  # the first page has no interval before it
    assert json.dumps(found)  # every figure is plain JSON for the samples file


@pytest.mark.parametrize(("flags", "said"), [
    (["--hours", "1"], "go with --soak"),
    (["--soak"], "a soak needs its hours: give --hours H"),
    (["--soak", "--hours", "1", "--rolling"], "--soak goes without --rolling"),
    (["--soak", "--hours", "nan"], "positive finite number"),
])
def test_a_soak_rehearsal_refuses_bad_input_in_one_line(flags: list[str], said: str, nothing_starts: None,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["rehearse", "--plan", "smoke", "--from", "v1.36.3", "--to", "v1.37.2", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_BAD_INPUT and len(err) == 1 and said in err[0], err
