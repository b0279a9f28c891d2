"""The index's tables, versioned: `loadtest_schema` holds the version an index is at, and MIGRATIONS, in order,
take an index from any earlier version to the latest. A migration is never edited once released: a change is a
new migration at the end. Opening an index migrates it forward under the index's lock, so two writers opening a
new or old index at once migrate it once; an index of a newer version than this tool knows is refused.

The tables (every name prefixed, so they sit beside a team's own tables in one PostgreSQL database):
- loadtest_runs: a run per row: `uid` (its key), `point` (the build it belongs to: the repeats of one build share
  it, and are one point of a history, their median), `point_order` (its place among them), `source` (the folder
  or page it was indexed from, as named), run_id, started_at, finished_at (ISO-8601 UTC), status, plan_name,
  plan_digest, kubernetes (the version), commit_id, versions and machine (JSON text, as results.json has them),
  indexed_at and indexed_on (the time and host of the write), and `results`: its results.json, credentials left
  out as a report page leaves them out, gzipped, so a history read from the index is the one its folders give.
  A run is there once: (run_id, started_at) is unique.
- loadtest_steps: a step per row: run (the uid), step_index, name, nodes, pods_per_node, status, started_at,
  duration_s.
- loadtest_figures: every figure of every step (what the report charts and compare weighs): run, step_index,
  chart and name (figures.CHARTS: "server_mutating", "POST pods"), unit ("s", "bytes", "%", "count"), rule (the
  regression rule compare applies; NULL for a figure shown only), value, and bound ("" a value, "<" at most it,
  ">" at least it: a quantile inside one histogram bucket). A figure not measured has no row, never a 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtests.errors import LoadTestError
from loadtests.index.db import Database

VERSION_TABLE = "loadtest_schema"


@dataclass(frozen=True)
class Migration:
    """One step of the schema: from version - 1 to version."""

    version: int
    why: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "runs, their steps, and every figure of every step", (
        """CREATE TABLE loadtest_runs (
            uid TEXT PRIMARY KEY,
            point TEXT NOT NULL,
            point_order INTEGER NOT NULL,
            source TEXT NOT NULL,
            run_id TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,
            plan_name TEXT NOT NULL,
            plan_digest TEXT NOT NULL,
            kubernetes TEXT,
            commit_id TEXT,
            versions TEXT NOT NULL,
            machine TEXT NOT NULL,
            indexed_at TEXT NOT NULL,
            indexed_on TEXT NOT NULL,
            results {bytes} NOT NULL,
            UNIQUE (run_id, started_at))""",
        """CREATE TABLE loadtest_steps (
            run TEXT NOT NULL REFERENCES loadtest_runs (uid) ON DELETE CASCADE,
            step_index INTEGER NOT NULL,
            name TEXT NOT NULL,
            nodes INTEGER NOT NULL,
            pods_per_node INTEGER NOT NULL,
            status TEXT NOT NULL,
            started_at TEXT NOT NULL,
            duration_s DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (run, step_index))""",
        """CREATE TABLE loadtest_figures (
            run TEXT NOT NULL REFERENCES loadtest_runs (uid) ON DELETE CASCADE,
            step_index INTEGER NOT NULL,
            chart TEXT NOT NULL,
            name TEXT NOT NULL,
            unit TEXT NOT NULL,
            rule TEXT,
            value DOUBLE PRECISION NOT NULL,
            bound TEXT NOT NULL,
            PRIMARY KEY (run, step_index, chart, name))""",
    )),
    # what `history --index --plan NAME --last N` looks up, and a dashboard's query of one figure over time
    Migration(2, "lookups by plan and start, and of one figure across runs", (
        "CREATE INDEX loadtest_runs_by_plan ON loadtest_runs (plan_name, started_at)",
        "CREATE INDEX loadtest_figures_by_name ON loadtest_figures (chart, name, step_index)",
    )),
)
LATEST = MIGRATIONS[-1].version


def version_of(db: Database) -> int:
    """The version an index is at: 0 for a new one (no version table yet)."""
    db.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)")
    found = db.rows(f"SELECT version FROM {VERSION_TABLE}")
    if not found:
        db.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (?)", (0,))
        return 0
    return int(found[0][0])


def migrate(db: Database, to: int = LATEST) -> int:
    """Take the index forward to version `to` (the latest by default), under its lock; the version it was at.
    An index newer than this tool is refused in one line, before anything is written to it."""
    with db.locked():
        at = version_of(db)
        if at > LATEST:
            raise LoadTestError(f"run index {db.url.shown} is at schema version {at}, newer than this loadtest "
                                f"knows ({LATEST}): use a newer loadtest to write to it or read it")
        for migration in MIGRATIONS:
            if at < migration.version <= to:
                for statement in migration.statements:
                    db.execute(statement)
                db.execute(f"UPDATE {VERSION_TABLE} SET version = ?", (migration.version,))
        return at
