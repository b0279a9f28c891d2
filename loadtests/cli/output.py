"""What a command says to its user: one line at a time, flushed, so it interleaves with the components' own
output in order.

A reader of that output may go away before it ends (`loadtest compare A B | head -1`). A program the shell
started would be ended by SIGPIPE there; the harness stops as it does for any terminating signal (teardown
first), says nothing more, and exits EXIT_OUTPUT_CLOSED, which no verdict shares."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from loadtests.shutdown import SHUTDOWN, Interrupted

REPORTS_DIR = Path("reports")  # where a command writes when it is given no --out


class OutputClosed(Interrupted):
    """The reader of stdout went away: the work stops as SIGPIPE would stop it, through the same teardown as
    any other terminating signal, and the command exits EXIT_OUTPUT_CLOSED."""

    def __init__(self) -> None:
        super().__init__(signal.SIGPIPE)


class _Stdout:
    closed = False  # a write to stdout found its reader gone; stdout is /dev/null from then on
    raised = False  # OutputClosed was raised in the main thread (once: teardown's lines must not raise it again)


def output_closed() -> bool:
    """Whether stdout's reader went away during this command."""
    return _Stdout.closed


def _close_stdout() -> None:
    """Point stdout at /dev/null, so that no later line, nor Python's own flush at exit, fails again."""
    _Stdout.closed = True
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stream with no descriptor (a test's capture): nothing to do
        pass


def flush() -> None:
    """Write what print() left in stdout's buffer now, so a reader that went away is found here (and stops the
    command) rather than at Python's exit, where it would be a second error line and exit 120."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _close_stdout()
    _raise_in_main_thread()


def _raise_in_main_thread() -> None:
    """OutputClosed in the main thread, once: another thread's line (the health watch's), or one said during
    teardown, only marks stdout closed, and the main thread's next line after it stops the work."""
    if (_Stdout.closed and not _Stdout.raised and not SHUTDOWN.tearing_down
            and threading.current_thread() is threading.main_thread()):
        _Stdout.raised = True
        raise OutputClosed


def write(text: str) -> None:
    """Text on stdout as it is (a command's --help), flushed; a reader that went away only marks stdout closed
    (argparse, which writes the help, ignores the error and exits 0)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _close_stdout()


def say(message: str) -> None:
    """One line on stdout, flushed; in the main thread, a reader that went away raises OutputClosed (once)."""
    try:
        print(message, flush=True)
    except BrokenPipeError:
        _close_stdout()
    _raise_in_main_thread()


def say_table(rows: list[list[str]], indent: str = "  ") -> None:
    """Rows of cells as aligned columns, a line each (the first row is the header); the last column is left as it
    is, so a long note there widens no other line."""
    widths = [max(len(row[i]) for row in rows if len(row) > i) for i in range(max(map(len, rows), default=0))]
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + row[-1:]
        say(indent + "  ".join(cells).rstrip())
