"""The run index: runs into SQLite and a real PostgreSQL (started here), every figure of every step as rows, the
schema migrated forward, two writers at once, and `history --index` finding what `history FOLDER...` finds."""

from __future__ import annotations

import multiprocessing
import sqlite3
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtests import results
from loadtests.analysis.samples import load_side, readings
from loadtests.cli.index import index_run
from loadtests.cli.main import build_parser
from loadtests.errors import EXIT_ENVIRONMENT, EXIT_PASSED, EXIT_SLO_FAILED, CompareError, LoadTestError
from loadtests.index.db import POSTGRESQL, SQLITE, IndexUnavailable, IndexUrl, connect, parse_url
from loadtests.index.schema import LATEST, MIGRATIONS, migrate
from loadtests.index.store import add, open_index, points, read_build
from loadtests.report.history import HISTORY_JUNIT_FILE
from loadtests.report.redact import redact
from tests.cli import error_lines, loadtest
from tests.postgres import Postgres, find_binaries, running_postgres
from tests.unit.reportdata import ROLLING, SAMPLE, edited_run, repeated_run
from tests.unit.test_history import PLANTED, RUNS, _post_pods, _scale_planted, _switch, runs

DIALECTS = [SQLITE, pytest.param(POSTGRESQL, marks=pytest.mark.cli)]


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    binaries = find_binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL binary (initdb and postgres on PATH or in /usr/lib/postgresql/*/bin): install "
                    "Debian's postgresql package (make setup does where it can)")
    with running_postgres(binaries) as server:
        yield server


@pytest.fixture
def index_url(request: pytest.FixtureRequest, tmp_path: Path) -> IndexUrl:
    """An empty index of the test's dialect: a SQLite file, or a database of its own on the suite's PostgreSQL."""
    if request.param == SQLITE:
        return parse_url(f"sqlite:///{tmp_path / 'index' / 'runs.db'}")
    server: Postgres = request.getfixturevalue("postgres")
    return parse_url(server.new_database())


def _tables(url: IndexUrl) -> dict[str, int]:
    db = connect(url)
    try:
        return {table: int(db.rows(f"SELECT count(*) FROM {table}")[0][0])
                for table in ("loadtest_runs", "loadtest_steps", "loadtest_figures")}
    finally:
        db.close()


def test_urls_name_sqlite_files_and_postgresql_servers() -> None:
    assert parse_url("reports/index.db") == IndexUrl(SQLITE, "reports/index.db")
    assert parse_url("sqlite:///reports/index.db") == IndexUrl(SQLITE, "reports/index.db")
    assert parse_url("sqlite:////var/lib/index.db") == IndexUrl(SQLITE, "/var/lib/index.db")
    url = parse_url("postgresql://ci:s3cret@db.example:5432/runs")
    assert url.dialect == POSTGRESQL and url.shown == "postgresql://ci:***@db.example:5432/runs"
    for wrong in ("mysql://db/runs", "sqlite:///", "", "http://x"):
        with pytest.raises(LoadTestError, match="expected a file path"):
            parse_url(wrong)


def test_a_new_index_holds_the_latest_schema_and_refuses_a_newer_one(tmp_path: Path) -> None:
    url = parse_url(str(tmp_path / "new" / "index.db"))
    open_index(url).close()
    with sqlite3.connect(url.target) as raw:
        assert raw.execute("SELECT version FROM loadtest_schema").fetchall() == [(LATEST,)]
        names = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
        assert {"loadtest_runs", "loadtest_steps", "loadtest_figures", "loadtest_runs_by_plan"} <= names
        raw.execute("UPDATE loadtest_schema SET version = ?", (LATEST + 1,))
    with pytest.raises(LoadTestError, match=f"schema version {LATEST + 1}, newer than this loadtest knows"):
        open_index(url)


def test_an_index_of_an_older_schema_is_migrated_forward_keeping_its_runs(tmp_path: Path) -> None:
    url = parse_url(str(tmp_path / "old.db"))
    db = connect(url)
    assert migrate(db, to=1) == 0  # as an index written by the first version of the schema
    add(db, read_build(SAMPLE))
    db.close()
    with sqlite3.connect(url.target) as raw:
        assert raw.execute("SELECT version FROM loadtest_schema").fetchall() == [(1,)]
        assert "loadtest_runs_by_plan" not in {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    db = open_index(url)
    try:
        assert migrate(db) == LATEST  # already there: nothing left to do
        [point] = points(db)
        assert point.first.run_id == results.load(SAMPLE).run_id
    finally:
        db.close()
    with sqlite3.connect(url.target) as raw:
        assert raw.execute("SELECT version FROM loadtest_schema").fetchall() == [(LATEST,)]
        assert "loadtest_runs_by_plan" in {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST + 1))


@pytest.mark.parametrize("index_url", DIALECTS, indirect=True)
def test_every_figure_of_every_step_lands_and_reads_back(index_url: IndexUrl, tmp_path: Path) -> None:
    repeats = repeated_run(tmp_path / "repeats", (0.9, 1.0, 1.1))
    bounded = edited_run(SAMPLE, tmp_path / "bounded", _post_pods(0.05, "<"))  # a p99 only "under 50 ms"
    db = open_index(index_url)
    try:
        done = [*add(db, read_build(bounded)), *add(db, read_build(repeats))]
        assert [d.added for d in done] == [True] * 4 and {d.steps for d in done} == {3}
        rows = db.rows("SELECT r.run_id, f.step_index, f.chart, f.name, f.rule, f.value, f.bound FROM loadtest_figures "
                       "f JOIN loadtest_runs r ON r.uid = f.run WHERE r.source = ?", (str(bounded),))
        again = add(db, read_build(bounded))
        stored = db.rows("SELECT run_id, plan_name, plan_digest, kubernetes, status FROM loadtest_runs ORDER BY run_id")
        read = points(db)
    finally:
        db.close()
    # the rows are every figure the report charts, as compare reads them: value and histogram bound, not-measured
    # absent; a figure shown only has no rule
    found, rules = readings(load_side(bounded, "A"), every=True)
    expected = {(step, chart, name, rules[(chart, name)], value, bound) for (chart, name), per_step in found.items()
                for step, got in per_step.items() for value, bound in got}
    assert {row[1:] for row in rows} == expected and len(rows) == len(expected) > 100
    assert ("server_mutating", "POST pods", "latency", 0.05, "<") in {row[2:] for row in rows}
    assert any(rule is None for _, _, _, rule, _, _ in expected)
    assert [d.added for d in again] == [False] and "already in the index" in again[0].line
    assert _tables(index_url)["loadtest_runs"] == 4
    sample = results.load(SAMPLE)
    assert (sample.run_id, "default", sample.plan_digest, "v1.37.2", "complete") in stored
    # read back whole: the build of three repeats is one point, its runs in their order
    assert sorted(p.n for p in read) == [1, 3]
    by_name = {p.name: p for p in read}
    assert [r.run_id for r in by_name[str(repeats)].runs] == [f"{sample.run_id}-repeat-{k}" for k in (1, 2, 3)]
    assert results.to_dict(by_name[str(bounded)].first) == redact(results.to_dict(results.load(bounded)))


def _history(capsys: pytest.CaptureFixture, out: Path, *named: str) -> tuple[int, list[str], bytes]:
    args = build_parser().parse_args(["history", *named, "--out", str(out), "--gate"])
    code = args.func(args)
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(("history: ", "junit: "))]
    return code, lines, (out / HISTORY_JUNIT_FILE).read_bytes()


@pytest.mark.parametrize("index_url", DIALECTS, indirect=True)
def test_history_from_the_index_equals_history_from_the_folders(index_url: IndexUrl, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    # the latest run starts a regression, and a figure moves out of its histogram's first bucket at run 7
    folders = [str(f) for f in runs(tmp_path / "runs", at=RUNS, edit=_switch(_post_pods(0.05, "<"), _post_pods(0.2)))]

    def latest(data: dict[str, Any]) -> None:
        data["started_at"] = "2026-01-10T10:00:00.000+00:00"
        _post_pods(0.2)(data)
        _scale_planted(data, 1.6)

    folders[0] = str(repeated_run(tmp_path / "latest", (0.98, 1.0, 1.02), latest))  # the latest: three repeats
    index = build_parser().parse_args(["index", index_url.target, *folders, str(ROLLING)])  # and another plan
    assert index.func(index) == EXIT_PASSED
    assert "13 run(s) added, 0 already there" in capsys.readouterr().out
    by_folder = _history(capsys, tmp_path / "from-folders", *folders)
    by_index = _history(capsys, tmp_path / "from-index", "--index", index_url.target, "--plan", "default")
    assert by_index == by_folder
    code, lines, _ = by_index
    assert code == 1 and any(line.startswith("REGRESSION") and PLANTED in line for line in lines), lines
    assert f"over {RUNS} runs" in lines[-1]
    # --last N: the N latest builds, as the same N folders give them
    last = _history(capsys, tmp_path / "last-index", "--index", index_url.target, "--plan", "default", "--last", "4")
    assert last == _history(capsys, tmp_path / "last-folders", *folders[:4])
    assert "over 4 runs" in last[1][-1]
    root = ET.fromstring(by_index[2])
    assert root.get("failures") != "0"


def _writer(url: IndexUrl, builds: list[Path], start: multiprocessing.synchronize.Barrier) -> None:
    """One of two runs writing to one index at once: each opens it (a new one: both migrate) and adds its builds."""
    start.wait()
    db = open_index(url)
    try:
        for build in builds:
            add(db, read_build(build))
    finally:
        db.close()


@pytest.mark.cli
@pytest.mark.parametrize("index_url", DIALECTS, indirect=True)
def test_two_runs_writing_to_one_index_at_once_both_land(index_url: IndexUrl, tmp_path: Path) -> None:
    folders = runs(tmp_path / "runs")
    context = multiprocessing.get_context("fork")
    start = context.Barrier(2)
    writers = [context.Process(target=_writer, args=(index_url, folders[k::2], start)) for k in (0, 1)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
    assert [w.exitcode for w in writers] == [0, 0]
    counts = _tables(index_url)
    assert counts["loadtest_runs"] == RUNS and counts["loadtest_steps"] == 3 * RUNS
    db = open_index(index_url)
    try:
        assert sorted(p.first.run_id for p in points(db)) == [f"run-{k:02d}" for k in range(1, RUNS + 1)]
        assert db.rows("SELECT version FROM loadtest_schema") == [(LATEST,)]
    finally:
        db.close()


def test_a_failed_write_after_a_run_says_so_and_never_passes_as_success(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    url = parse_url(str(blocked / "index.db"))  # its folder cannot be made: the write fails
    run_dir = tmp_path / "run"
    (run_dir).mkdir()
    (run_dir / results.RESULTS_FILE).write_bytes((SAMPLE / results.RESULTS_FILE).read_bytes())
    assert index_run(url, run_dir, EXIT_PASSED) == EXIT_ENVIRONMENT
    assert index_run(url, run_dir, EXIT_SLO_FAILED) == EXIT_SLO_FAILED
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("INDEX FAILED run index ") for line in lines)
    assert f"add it later with `loadtest index {url.shown} {run_dir}`" in lines[0]
    assert (run_dir / results.RESULTS_FILE).read_bytes() == (SAMPLE / results.RESULTS_FILE).read_bytes()
    good = parse_url(str(tmp_path / "index.db"))
    assert index_run(good, run_dir, EXIT_PASSED) == EXIT_PASSED
    assert capsys.readouterr().out.startswith(f"index: run {results.load(SAMPLE).run_id} ")


def test_what_the_index_cannot_give_is_said_in_one_line(tmp_path: Path) -> None:
    url = parse_url(str(tmp_path / "index.db"))
    db = open_index(url)
    try:
        add(db, read_build(SAMPLE))
        add(db, read_build(ROLLING))
        with pytest.raises(CompareError, match=r"holds runs of 2 plans \(default, rolling-check\): name one"):
            points(db)
        with pytest.raises(CompareError, match="holds no run of plan 'nightly'"):
            points(db, plan="nightly")
    finally:
        db.close()
    parser = build_parser()
    for argv, said in ((["history", "--plan", "default", "a", "b", "c"], "--plan and --last choose runs of an index"),
                       (["history", "a", "--index", url.target], "read one or the other"),
                       (["history"], "name the runs")):
        args = parser.parse_args(argv)
        with pytest.raises(LoadTestError, match=said):
            args.func(args)
    unreachable = parse_url("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(IndexUnavailable, match=r"run index postgresql://nobody@127.0.0.1:1/none: cannot connect"):
        open_index(unreachable)


def test_the_commands_refuse_a_url_they_cannot_use(tmp_path: Path) -> None:
    wrong = loadtest("index", "mysql://db/runs", str(SAMPLE))
    assert wrong.returncode == 2 and len(error_lines(wrong)) == 1 and "expected a file path" in wrong.stderr
    added = loadtest("index", str(tmp_path / "index.db"), str(SAMPLE))
    assert added.returncode == 0 and "1 run(s) added" in added.stdout


def test_a_build_lands_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write the database refuses halfway (here: a figure without a value, which no figure row may be) leaves
    none of the build's runs, steps or figures behind, and says so in one line."""
    from loadtests.index import store

    repeats = repeated_run(tmp_path / "repeats", (0.9, 1.0, 1.1))
    url = parse_url(str(tmp_path / "index.db"))
    written = store.figure_rows
    calls = []

    def refused_on_the_third_run(uid: str, run: results.RunResult) -> list[tuple[object, ...]]:
        calls.append(run.run_id)
        rows = written(uid, run)
        return rows if len(calls) < 3 else [(*rows[0][:6], None, "")]

    monkeypatch.setattr(store, "figure_rows", refused_on_the_third_run)
    db = open_index(url)
    try:
        with pytest.raises(IndexUnavailable, match=rf"cannot write the runs of {repeats} \(IntegrityError: NOT NULL"):
            add(db, read_build(repeats))
    finally:
        db.close()
    assert len(calls) == 3 and _tables(url) == {"loadtest_runs": 0, "loadtest_steps": 0, "loadtest_figures": 0}
