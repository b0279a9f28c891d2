"""A real PostgreSQL for the run index's tests, started by the suite itself: `initdb` in a temporary folder, the
server on a free loopback port with its unix socket in that folder, stopped by its pid at the end.

PostgreSQL refuses to run as root: when the suite is root, initdb and the server run as an unprivileged user
(postgres where the machine has that user, else nobody), the folder handed to it. Where no PostgreSQL binary is
found (on PATH, or Debian's /usr/lib/postgresql/<major>/bin), the tests that need one are skipped, saying so."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtests.controlplane.processes import free_ports
from loadtests.polling import poll_until

READY_S = 30.0
STOP_S = 15.0
SUPERUSER = "loadtest"
UNPRIVILEGED = ("postgres", "nobody")  # who runs the server when the suite is root, the first the machine has


def find_binaries() -> Path | None:
    """The folder holding initdb and postgres: on PATH, else the newest of Debian's versioned folders."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(found).resolve().parent
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
                    if p.parent.name.isdigit() else 0)
    return next((p for p in reversed(debian) if (p / "initdb").is_file() and (p / "postgres").is_file()), None)


def _server_user() -> pwd.struct_passwd | None:
    """Who runs initdb and postgres: this user, or when it is root an unprivileged one (None: this user)."""
    if os.geteuid() != 0:
        return None
    for name in UNPRIVILEGED:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError(f"the suite runs as root and PostgreSQL refuses root, but none of the users "
                       f"{', '.join(UNPRIVILEGED)} exists to run it as")


@dataclass(frozen=True)
class Postgres:
    """A running server: its port, and URLs of databases on it."""

    port: int
    folder: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a database of its own, so each test's index starts empty."""
        import psycopg

        name = f"index_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def _accepts(url: str) -> bool:
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


@contextmanager
def running_postgres(binaries: Path) -> Iterator[Postgres]:
    """initdb, then the server, ready when it accepts a connection; stopped (fast shutdown) by its pid after."""
    user = _server_user()
    folder = Path(tempfile.mkdtemp(prefix="loadtest-postgres-"))  # in /tmp itself: the server's user can enter it
    as_user = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid}
    if user is not None:
        os.chown(folder, user.pw_uid, user.pw_gid)
    process = None
    try:
        made = subprocess.run([str(binaries / "initdb"), "-D", str(folder / "data"), "-U", SUPERUSER, "-A", "trust",
                               "-E", "UTF8", "--no-sync"], cwd=folder, capture_output=True, text=True, **as_user)
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed (exit {made.returncode}): {made.stderr.strip()[-2000:]}")
        port = free_ports(1)[0]
        with open(folder / "server.log", "wb") as log:
            process = subprocess.Popen([str(binaries / "postgres"), "-D", str(folder / "data"), "-h", "127.0.0.1",
                                        "-p", str(port), "-k", str(folder), "-c", "fsync=off",
                                        "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                                       cwd=folder, stdout=subprocess.DEVNULL, stderr=log, **as_user)
        server = Postgres(port, folder)
        if not poll_until(lambda: _accepts(server.url()), READY_S, interval_s=0.05,
                          abort=lambda: process.poll() is not None):
            log_tail = (folder / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL did not accept connections within {READY_S:g} s: {log_tail}")
        yield server
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown: ends the clients' sessions, then exits
            try:
                process.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(folder, ignore_errors=True)
