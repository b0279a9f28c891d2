"""The one adapter between the index's queries and its two databases: SQLite (the standard library's sqlite3, a
file, no server) and PostgreSQL (psycopg 3, a team's server).

Every query is written once, with `?` for its parameters (SQLite's paramstyle); for PostgreSQL the adapter turns
each `?` into psycopg's `%s`, so no query may hold a literal `?` or `%`. Table definitions name their column
types in words both databases read (TEXT, INTEGER, DOUBLE PRECISION), except bytes, which are written `{bytes}`
and given per dialect (BLOB, BYTEA). A write holds the index's one lock for its transaction (SQLite: BEGIN
IMMEDIATE, waiting up to LOCK_WAIT_S for another writer; PostgreSQL: a transaction-scoped advisory lock), so two
runs writing at once, or two first writers creating the tables, take turns instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from loadtests.errors import EnvironmentProblem, LoadTestError

SQLITE, POSTGRESQL = "sqlite", "postgresql"
SQLITE_PREFIX = "sqlite:///"  # as SQLAlchemy writes it: sqlite:///relative/path, sqlite:////absolute/path
POSTGRES_SCHEMES = ("postgresql", "postgres")
LOCK_WAIT_S = 60.0  # how long a writer waits for another to finish (a run's rows take well under a second)
ADVISORY_LOCK = 7_250_001  # PostgreSQL's advisory lock key of the index (any constant of our own)
BYTES = {SQLITE: "BLOB", POSTGRESQL: "BYTEA"}
URL_HELP = ("expected a file path (reports/index.db), sqlite:///PATH (sqlite:////abs/path for an absolute one) or "
            "postgresql://USER@HOST[:PORT]/DATABASE")


class IndexUnavailable(EnvironmentProblem):
    """The index could not be opened, read or written (the server is down, the file is locked or read-only):
    one line naming the index and the database's own message."""


@dataclass(frozen=True)
class IndexUrl:
    """Where the index is: a dialect and what its driver connects to (a file path, or a PostgreSQL URL)."""

    dialect: str
    target: str

    @property
    def shown(self) -> str:
        """The URL for people and logs, its password left out."""
        if self.dialect == SQLITE:
            return self.target
        parts = urlsplit(self.target)
        if parts.password is None:
            return self.target
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def parse_url(text: str) -> IndexUrl:
    """The index a --index argument names; LoadTestError (exit 2) for anything else, before anything runs."""
    text = text.strip()
    if not text:
        raise LoadTestError(f"--index: no index named; {URL_HELP}")
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    if scheme in POSTGRES_SCHEMES:
        return IndexUrl(POSTGRESQL, text)
    if text.startswith(SQLITE_PREFIX):
        path = text[len(SQLITE_PREFIX):]
        if path:
            return IndexUrl(SQLITE, path)
    elif not scheme:
        return IndexUrl(SQLITE, text)
    raise LoadTestError(f"--index {text}: not an index this tool writes to; {URL_HELP}")


class Database:
    """An open index: queries in one paramstyle, a locked transaction for writes, and one line for any failure."""

    def __init__(self, url: IndexUrl, connection: Any, errors: tuple[type[BaseException], ...]) -> None:
        self.url, self.connection, self.errors = url, connection, errors

    @property
    def dialect(self) -> str:
        return self.url.dialect

    def sql(self, query: str) -> str:
        """The query in this database's paramstyle, its `{bytes}` type named as this database names it."""
        query = query.replace("{bytes}", BYTES[self.dialect])
        if self.dialect == SQLITE:
            return query
        if "%" in query:
            raise ValueError(f"a literal % in an index query reads as a psycopg placeholder: {query}")
        return query.replace("?", "%s")

    def execute(self, query: str, params: Sequence[Any] = ()) -> Any:
        """The cursor of one statement (its rows: .fetchall())."""
        cursor = self.connection.cursor()
        cursor.execute(self.sql(query), tuple(params))
        return cursor

    def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.connection.cursor().executemany(self.sql(query), [tuple(r) for r in rows])

    def rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.execute(query, params).fetchall()]

    @contextmanager
    def locked(self) -> Iterator[Database]:
        """One transaction holding the index's lock: committed whole at the end, rolled back on any error."""
        if self.dialect == SQLITE:
            self.connection.execute("BEGIN IMMEDIATE")
        else:
            self.execute("SELECT pg_advisory_xact_lock(?)", (ADVISORY_LOCK,))
        try:
            yield self
        except BaseException:
            self.connection.rollback()
            raise
        self.connection.commit()

    def close(self) -> None:
        with suppress(*self.errors):  # a connection the server already dropped: nothing is left to lose
            self.connection.close()

    def failed(self, doing: str, error: BaseException) -> IndexUnavailable:
        """The one line a database error becomes: what was being done, where, and the database's first line."""
        return unavailable(self.url, doing, error)


def unavailable(url: IndexUrl, doing: str, error: BaseException) -> IndexUnavailable:
    said = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    return IndexUnavailable(f"run index {url.shown}: cannot {doing} ({type(error).__name__}: {said})")


def connect(url: IndexUrl) -> Database:
    """An open connection to the index (a SQLite file is created, with its folder, on first use)."""
    if url.dialect == SQLITE:
        return _sqlite(url)
    return _postgresql(url)


def _sqlite(url: IndexUrl) -> Database:
    import sqlite3

    try:
        Path(url.target).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # autocommit mode (isolation_level None): every transaction is the explicit one `locked` opens
        connection = sqlite3.connect(Path(url.target).expanduser(), timeout=LOCK_WAIT_S, isolation_level=None)
        connection.execute("PRAGMA foreign_keys = ON")
    except (OSError, sqlite3.Error) as error:
        raise unavailable(url, "open the file", error) from None
    return Database(url, connection, (sqlite3.Error, OSError))


def _postgresql(url: IndexUrl) -> Database:
    try:
        import psycopg
    except ImportError:
        raise LoadTestError("a PostgreSQL index needs psycopg 3, which is not installed: make venv installs it "
                            "(or .venv/bin/pip install 'psycopg[binary]')") from None
    try:
        connection = psycopg.connect(url.target, connect_timeout=int(LOCK_WAIT_S // 6))
    except psycopg.Error as error:
        raise unavailable(url, "connect", error) from None
    return Database(url, connection, (psycopg.Error, OSError))


def placeholders(count: int) -> str:
    """"?, ?, ?" for an IN list of `count` values."""
    return ", ".join("?" * count)

