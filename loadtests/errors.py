"""Errors meant for people: each carries one line that says what is wrong and what to do.

Exit codes: 0 passed, 1 an SLO failed or a regression, 2 bad input, 3 aborted (a component failed or hung,
a signal, an unexpected error), 4 the environment (disk full, out of memory), 141 the output's reader went away.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from pathlib import Path

# The one table of exit codes (docs/faults.md shows it; the CLI and every error class use these names)
EXIT_PASSED, EXIT_SLO_FAILED, EXIT_BAD_INPUT, EXIT_ABORTED, EXIT_ENVIRONMENT = 0, 1, 2, 3, 4
# 128 + SIGPIPE, as a shell reports a process a broken pipe ended: the reader of the output went away
# (`loadtest compare A B | head -1`)
EXIT_OUTPUT_CLOSED = 141

class LoadTestError(Exception):
    """Base of every error the CLI prints as one line and exits non-zero on, without a traceback."""

    exit_code = EXIT_BAD_INPUT


class SetupError(LoadTestError):
    """Binaries or toolchains are missing or cannot be provided."""


class PlanError(LoadTestError):
    """The plan file is invalid: the message names the field path and the reason."""


class TargetError(LoadTestError):
    """The control plane could not be started, reached, or is refused (safety guard)."""


class AccessRefused(TargetError):
    """Who the kubeconfig says the harness is was refused before anything started: its credentials (an exec
    plugin that fails, a token the cluster rejects, certificates that do not load) or its rights (a user who
    may not list nodes). The user's input to fix, exit 2, even when the runner found it."""

    exit_code = EXIT_BAD_INPUT


class Saturated(TargetError):
    """The control plane did not converge within the step's budget (nodes Ready, pods Running): not a crash
    but a finding, the breaking point of the run; `condition` says what did not converge, `detail` how far."""

    def __init__(self, condition: str, detail: str) -> None:
        super().__init__(f"{condition}: {detail}")
        self.condition = condition
        self.detail = detail


class ComponentFailed(TargetError):
    """A component of a control plane the harness starts exited, or never became ready, while it started (a bad
    flag in `target.component_args`, a missing file, a port taken meanwhile): the control plane broke, not the
    command's input. Exit 3 from `loadtest up` as from a run, whose abort it is too."""

    exit_code = EXIT_ABORTED


class RunAborted(LoadTestError):
    """A run stopped before its last step (a component died, or the user interrupted)."""

    exit_code = EXIT_ABORTED


class CompareError(LoadTestError):
    """Two runs cannot be compared (different plans, unmatched steps) or the regression thresholds are invalid."""


class UnreadableFile(LoadTestError, ValueError):
    """A file the harness reads back (results, a kept /metrics page, a lesson's record, a recorded cost) is not
    what it should be: one line naming the file and what is wrong, exit 2. A ValueError too, so a reader that
    skips what it cannot read (a repeat that left a broken file) still does."""


def unreadable(path: Path, what: str, error: BaseException, fix: str = "") -> UnreadableFile:
    """"<path>: not a readable <what> (BadGzipFile: Not a gzipped file (b'xx')); <fix>"."""
    detail = str(error).splitlines()[0][:200] if str(error) else ""
    said = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    return UnreadableFile(f"{path}: not a readable {what} ({said})" + (f"; {fix}" if fix else ""))


class EnvironmentProblem(LoadTestError):
    """The machine refused: the disk is full, memory ran out. Not the control plane's doing."""

    exit_code = EXIT_ENVIRONMENT


MIN_FREE_BYTES = 1 << 20  # below this a folder's filesystem counts as full


NO_SPACE = "no space left on device"  # how Go and the C library say ENOSPC, in a component's log or an OSError


def free_bytes(folder: Path) -> tuple[Path, int] | None:
    """(the folder or its nearest existing parent, the free bytes of its filesystem); None if unknown."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return probe, shutil.disk_usage(probe).free
    except OSError:
        return None


def disk_full(folder: Path) -> str | None:
    """'disk full: ...' when the filesystem of `folder` (or of its nearest existing parent) is full."""
    found = free_bytes(folder)
    if found is None:
        return None
    probe, free = found
    return f"disk full: {probe} has {free} bytes free" if free < MIN_FREE_BYTES else None


def full_disk_of(folders: list[Path], said: str) -> str | None:
    """Which of `folders` is full: one below MIN_FREE_BYTES, or, where what failed said "no space left on
    device" (etcd preallocates its WAL: it can run out with megabytes still free), the one with the least free
    bytes. None when no disk is full."""
    for folder in folders:
        if full := disk_full(folder):
            return full
    if NO_SPACE not in said.lower():
        return None
    known = [(folder, found) for folder in folders if (found := free_bytes(folder)) is not None]
    if not known:
        return f"disk full ({NO_SPACE})"
    _folder, (probe, free) = min(known, key=lambda item: item[1][1])
    return f"disk full: {probe} has {free:,} bytes free ({NO_SPACE})"


def write_error_log(folder: Path, error: BaseException) -> Path:
    """The traceback of an unexpected error, where the user will look for it (the run folder, or a temp file
    when that cannot take it); the path, for the one line the user sees."""
    text = "".join(traceback.format_exception(error))
    for path in (folder / "error.log", Path(tempfile.gettempdir()) / f"loadtest-error-{os.getpid()}.log"):
        try:
            path.write_text(text)
            return path
        except OSError:
            continue
    return Path("(not written)")
