"""Errors meant for people: each carries one line that says what is wrong and what to do.

Exit codes: 0 passed, 1 an SLO failed or a regression, 2 bad input, 3 aborted (a component failed or hung,
a signal, an unexpected error), 4 the environment (disk full, out of memory), 141 the output's reader went away.
"""

from __future__ import annotations

import os
import re
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


# C0 control characters no text format the harness reads allows (YAML, JSON, /metrics text, HTML): a file
# holding one is binary, whatever decoding it survives; tab, line feed and carriage return are text
_CONTROL = frozenset(range(0x20)) - {0x09, 0x0A, 0x0D}
_CONTROL_BYTE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # the same, searched at C speed (pages of megabytes)
_TEXT_FIX = "save it as UTF-8 text"


def _utf16(data: bytes) -> bool:
    """UTF-16 text: a byte-order mark, or bytes that decode as UTF-16 into mostly ASCII, no control characters."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    for encoding in ("utf-16-le", "utf-16-be"):
        try:
            text = data[:len(data) // 2 * 2].decode(encoding)
        except UnicodeDecodeError:
            continue
        ascii_share = sum(" " <= char <= "~" or char in "\t\n\r" for char in text) / max(len(text), 1)
        if text and ascii_share >= 0.5 and not any(ord(char) in _CONTROL for char in text):
            return True  # the formats read are mostly ASCII: random bytes decode to anything but that
    return False


def not_text(data: bytes) -> str | None:
    """Why `data` is not UTF-8 text ("UTF-16 text, not UTF-8", "binary bytes, not text: 0x00 at offset 5",
    ...), or None when it is: said once here, so every file the harness reads is refused in the same words
    instead of a UnicodeDecodeError from deep in a parser."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32 text, not UTF-8"
    control = _CONTROL_BYTE.search(data)
    if control is not None and _utf16(data):
        return "UTF-16 text, not UTF-8"
    if control is not None:
        return f"binary bytes, not text: 0x{data[control.start()]:02x} at offset {control.start()}"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        if _utf16(data):
            return "UTF-16 text, not UTF-8"
        return (f"not UTF-8 text: byte 0x{data[error.start]:02x} at offset {error.start}, another encoding "
                "such as Latin-1?")
    return None


def text_of(data: bytes, path: Path, what: str, fix: str = "") -> str:
    """The text of a file's bytes (UTF-8, a byte-order mark allowed); UnreadableFile naming `path` and why it is
    not text, exit 2, otherwise. `fix`: what to do about binary bytes (text in another encoding: save as UTF-8)."""
    why = not_text(data)
    if why is not None:
        fix = fix if why.startswith("binary") else _TEXT_FIX
        raise UnreadableFile(f"{path}: not a readable {what} ({why})" + (f"; {fix}" if fix else ""))
    return data.decode("utf-8-sig")


def read_text(path: Path, what: str, fix: str = "") -> str:
    """The text of a file the harness reads (a plan, a template, a kubeconfig, results, a kept page), refused in
    one line when it is not text (text_of); an OSError is left to the caller, who words it for its file."""
    return text_of(Path(path).read_bytes(), path, what, fix)


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


def full_disk_line(full: str, cause: BaseException | str) -> str:
    """The one line of a run a full disk ended: the disk, then what failed on it ("disk full: /r has 0 bytes
    free; etcd exited (code 2): ... no space left on device"), the disk said once when what failed is itself the
    full disk (a write of ours refused, said as "disk full: ..."). A harness error is said as its line; anything
    else with its type, which says what kind of failure it was."""
    if isinstance(cause, BaseException):
        cause = str(cause) if isinstance(cause, LoadTestError) else f"{type(cause).__name__}: {cause}"
    if not cause or full in cause or cause.startswith("disk full"):
        return (cause or full)[:600]
    return f"{full}; {cause}"[:600]


def os_reason(error: OSError) -> str:
    """What an OSError says, in one line and never "None": its strerror ("No space left on device"), or, for
    shutil.copytree's Error (no strerror: a list of (source, destination, why), one per file), the first file's
    why and how many more failed."""
    if error.strerror:
        return error.strerror
    failures = error.args[0] if error.args and isinstance(error.args[0], list) else []
    if not failures:
        return " ".join(str(error).split())[:300] or type(error).__name__
    first = failures[0]
    why = str(first[-1]) if isinstance(first, tuple | list) and first else str(first)
    why = re.sub(r"^\[Errno \d+\] ", "", " ".join(why.split()))
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return f"{why[:300]}{more}"


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
