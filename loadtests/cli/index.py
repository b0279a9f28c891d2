"""`loadtest index URL RUN...` and `loadtest run --index URL`: runs into the run index (loadtests/index/).

A run's folder is written first, as without an index; the index gets it after. A write that fails then is said
in one line, "INDEX FAILED ...", with the command that adds the folder later, and the run's exit code keeps its
meaning: a run that passed exits 4 (the environment: the index could not take it) instead of 0, so the miss
cannot pass as success; a run that failed or aborted keeps its own code (1, 3), which already fails the job."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtests.cli.flags import index_arg
from loadtests.cli.output import say
from loadtests.errors import EXIT_ENVIRONMENT, EXIT_PASSED, LoadTestError
from loadtests.index.db import IndexUrl

if TYPE_CHECKING:
    from loadtests.index.store import Indexed


def add_runs(url: IndexUrl, named: list[Path]) -> list[Indexed]:
    """Every named build read first (one that cannot be read is refused before anything is written), then each
    written in its own transaction; what was done with each run."""
    from loadtests.index.store import add, open_index, read_build

    builds = [read_build(path) for path in named]
    db = open_index(url)
    try:
        return [done for build in builds for done in add(db, build)]
    finally:
        db.close()


def check_index(url: IndexUrl) -> None:
    """Before a run starts: the index opens (connected, its schema brought up to date), or the run is refused in
    one line, rather than finding out after the load."""
    from loadtests.index.store import open_index

    open_index(url).close()


def index_run(url: IndexUrl, out_dir: Path, code: int) -> int:
    """After a run: its folder (a run, or its repeats as one build) into the index; the exit code to end with."""
    try:
        done = add_runs(url, [out_dir])
    except LoadTestError as error:
        say(f"INDEX FAILED {error}; the run folder is whole: add it later with "
            f"`loadtest index {url.shown} {out_dir}`")
        return EXIT_ENVIRONMENT if code == EXIT_PASSED else code
    for run in done:
        say(f"index: {run.line}")
    return code


def cmd_index(args: argparse.Namespace) -> int:
    done = add_runs(args.url, [Path(p) for p in args.runs])
    for run in done:
        say(run.line)
    added = sum(run.added for run in done)
    say(f"run index {args.url.shown}: {added} run(s) added, {len(done) - added} already there")
    return EXIT_PASSED


def add_commands(sub: Any) -> None:
    p = sub.add_parser("index", help="add runs already on disk to a run index (SQLite file or PostgreSQL), "
                                     "which `loadtest history --index` reads")
    p.add_argument("url", type=index_arg, metavar="URL",
                   help="the index: a file path or sqlite:///PATH (SQLite, created on first use), or "
                        "postgresql://USER@HOST[:PORT]/DATABASE")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run folders, folders of repeats (one build: one point of a history), results.json files "
                        "or report pages; a run already in the index is left as it is")
    p.set_defaults(func=cmd_index)
