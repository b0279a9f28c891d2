"""Runs into the index, and back out as the points of a history.

A write adds one build (a run, or the repeats of one build) in one transaction: its runs, their steps and every
figure land together or not at all. A run the index already holds (the same run_id and start) is left as it is
and said so, so indexing a folder twice, or a run and then its folder, adds nothing twice. A read gives the
builds of one plan in start order, each a history.Point made from the results the index keeps, so
`history --index` finds what `history FOLDER...` finds for the same runs.
"""

from __future__ import annotations

import gzip
import json
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from loadtests import results
from loadtests.analysis import figures
from loadtests.analysis.history import Point
from loadtests.analysis.samples import load_side
from loadtests.errors import CompareError
from loadtests.index.db import Database, IndexUrl, connect, placeholders
from loadtests.index.schema import migrate
from loadtests.report.redact import redact
from loadtests.results import RunResult

VERB = "index"
RUN_COLUMNS = ("uid", "point", "point_order", "source", "run_id", "started_at", "finished_at", "status", "plan_name",
               "plan_digest", "kubernetes", "commit_id", "versions", "machine", "indexed_at", "indexed_on", "results")
STEP_COLUMNS = ("run", "step_index", "name", "nodes", "pods_per_node", "status", "started_at", "duration_s")
FIGURE_COLUMNS = ("run", "step_index", "chart", "name", "unit", "rule", "value", "bound")


def _insert(table: str, columns: Sequence[str], conflict: str = "") -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders(len(columns))}){conflict}"


@dataclass(frozen=True)
class Indexed:
    """What a write did with one run: added (its steps and figures counted), or already in the index."""

    run_id: str
    started_at: str
    source: str
    added: bool
    steps: int = 0
    figures: int = 0

    @property
    def line(self) -> str:
        if not self.added:
            return f"run {self.run_id} ({self.source}) of {self.started_at}: already in the index, left as it is"
        return f"run {self.run_id} ({self.source}): indexed {self.steps} step(s), {self.figures} figure(s)"


def open_index(url: IndexUrl) -> Database:
    """The index, connected and migrated to the latest schema; any database failure is one line."""
    db = connect(url)
    try:
        migrate(db)
    except db.errors as error:
        db.close()
        raise db.failed("bring its schema up to date", error) from None
    except BaseException:
        db.close()
        raise
    return db


def figure_rows(uid: str, run: RunResult) -> list[tuple[object, ...]]:
    """Every figure of every step of the run, as the report charts it (figures.series): one row per measured
    value, none where a figure was not measured; SLO threshold lines are the plan's, not measurements."""
    rows: list[tuple[object, ...]] = []
    for s in figures.series(run):
        if s.slo_line:
            continue
        for position, (step, value) in enumerate(zip(run.steps, s.values, strict=True)):
            if value is not None:
                rows.append((uid, step.index, s.chart, s.name, figures.CHARTS[s.chart].unit, s.rule, float(value),
                             s.bound(position)))
    return rows


def _run_row(uid: str, point: str, order: int, source: str, run: RunResult, now: str) -> tuple[object, ...]:
    env = run.environment if isinstance(run.environment, dict) else {}
    versions = env.get("versions") if isinstance(env.get("versions"), dict) else {}
    plan_name = run.plan.get("name") if isinstance(run.plan, dict) else None
    commit = env.get("commit") or versions.get("commit")
    packed = gzip.compress(json.dumps(redact(results.to_dict(run)), separators=(",", ":")).encode(), mtime=0)
    return (uid, point, order, source, run.run_id, run.started_at, run.finished_at, run.status, str(plan_name or ""),
            run.plan_digest, versions.get("kubernetes"), commit, json.dumps(versions, sort_keys=True),
            json.dumps(env.get("machine") or {}, sort_keys=True), now, socket.gethostname(), packed)


def _add_run(db: Database, point: str, order: int, source: str, run: RunResult, now: str) -> Indexed:
    uid = uuid.uuid4().hex
    added = db.execute(_insert("loadtest_runs", RUN_COLUMNS, " ON CONFLICT (run_id, started_at) DO NOTHING"),
                       _run_row(uid, point, order, source, run, now)).rowcount
    if added != 1:
        return Indexed(run.run_id, run.started_at, source, added=False)
    steps = [(uid, s.index, s.name, s.nodes, s.pods_per_node, s.status, s.started_at, float(s.duration_s))
             for s in run.steps]
    db.executemany(_insert("loadtest_steps", STEP_COLUMNS), steps)
    rows = figure_rows(uid, run)
    db.executemany(_insert("loadtest_figures", FIGURE_COLUMNS), rows)
    return Indexed(run.run_id, run.started_at, source, added=True, steps=len(steps), figures=len(rows))


@dataclass(frozen=True)
class Build:
    """One build read from disk for the index: what was named, and its runs (one, or its repeats in order)."""

    source: str
    runs: list[RunResult]


def read_build(named: Path) -> Build:
    """A run folder, a results.json, a folder of repeats or a report page, read as `loadtest history` reads it:
    one line (exit 2) for what it cannot read, before anything is written."""
    side = load_side(Path(named), str(named), force=True, verb=VERB)
    return Build(str(named), side.runs)


def add(db: Database, build: Build, now: str | None = None) -> list[Indexed]:
    """One build into the index in one transaction: its runs, their steps and figures land together or not at
    all (IndexUnavailable, one line, when the database refuses)."""
    now = now or results.utc_now()
    point = uuid.uuid4().hex
    try:
        with db.locked():
            return [_add_run(db, point, k, build.source, run, now) for k, run in enumerate(build.runs)]
    except db.errors as error:
        raise db.failed(f"write the runs of {build.source}", error) from None


# ---- reading ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """A run the index holds, as listed before its results are read."""

    uid: str
    point: str
    order: int
    source: str
    plan_name: str
    started_at: str

    @property
    def started(self) -> datetime:
        try:
            found = datetime.fromisoformat(self.started_at)
        except ValueError:
            raise CompareError(f"cannot make a history: run {self.uid} of the index has no readable start "
                               f"({self.started_at!r})") from None
        return found if found.tzinfo else found.replace(tzinfo=UTC)  # as history reads a start without a zone


def _listed(db: Database, plan: str | None) -> list[Stored]:
    query = "SELECT uid, point, point_order, source, plan_name, started_at FROM loadtest_runs"
    found = db.rows(query + (" WHERE plan_name = ?" if plan is not None else ""), (plan,) if plan is not None else ())
    return [Stored(str(u), str(p), int(o), str(s), str(n), str(t)) for u, p, o, s, n, t in found]


def _chosen(listed: list[Stored], plan: str | None, last: int | None, where: str) -> list[list[Stored]]:
    """The builds a history reads: of one plan (refused when the index holds several and none is named), the
    `last` latest by their earliest start, each its runs in their order."""
    plans = sorted({s.plan_name for s in listed})
    if not listed:
        held = f"no run of plan {plan!r}" if plan is not None else "no run"
        raise CompareError(f"cannot make a history: run index {where} holds {held}")
    if plan is None and len(plans) > 1:
        raise CompareError(f"cannot make a history: run index {where} holds runs of {len(plans)} plans "
                           f"({', '.join(plans)}): name one with --plan")
    builds: dict[str, list[Stored]] = {}
    for stored in listed:
        builds.setdefault(stored.point, []).append(stored)
    ordered = sorted(builds.values(), key=lambda runs: min(s.started for s in runs))
    return [sorted(runs, key=lambda s: s.order) for runs in ordered[-last if last else 0:]]


def _results(db: Database, build: list[Stored]) -> list[RunResult]:
    rows = dict(db.rows(f"SELECT uid, results FROM loadtest_runs WHERE uid IN ({placeholders(len(build))})",
                        [s.uid for s in build]))
    return [results.from_dict(json.loads(gzip.decompress(bytes(rows[s.uid])))) for s in build]


def points(db: Database, plan: str | None = None, last: int | None = None) -> list[Point]:
    """The builds of one plan the index holds, as history points (the `last` latest, or all), in start order."""
    if last is not None and last < 1:
        raise CompareError(f"cannot make a history: --last {last}: name how many of the latest runs, e.g. --last 30")
    try:
        builds = _chosen(_listed(db, plan), plan, last, db.url.shown)
        return [Point(name=build[0].source, runs=_results(db, build), path=Path(build[0].source))
                for build in builds]
    except db.errors as error:
        raise db.failed("read its runs", error) from None
