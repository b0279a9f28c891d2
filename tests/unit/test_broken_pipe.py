"""A reader of `loadtest`'s output that goes away (`loadtest compare A B | head -1`) ends the command with its own
exit code, EXIT_OUTPUT_CLOSED (141, as a shell reports a process SIGPIPE ended), never 1 (a verdict), and with
nothing on stderr: no traceback, no second error line."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from loadtests.cli import output
from loadtests.errors import EXIT_OUTPUT_CLOSED, EXIT_SLO_FAILED
from tests.cli import REPO
from tests.unit.reportdata import SAMPLE, copy_run, edited_run, scale_latencies

PIPE_BYTES = 4096  # the smallest pipe Linux makes: a command that says more than this must block on its reader


def first_line_then_close(*args: str, close_at_once: bool = False) -> tuple[int, bytes, str]:
    """`loadtest ARGS | head -1`: read its output up to the first newline (byte by byte, so nothing past it is
    taken from the pipe), close the pipe, and wait; its exit code, the line, and its stderr."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    proc = subprocess.Popen([sys.executable, "-m", "loadtests.cli.main", *args], cwd=REPO, stdout=write_end,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(write_end)
    line = b""
    while not close_at_once and not line.endswith(b"\n") and (byte := os.read(read_end, 1)):
        line += byte
    os.close(read_end)
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, line, stderr.decode()


def test_compare_read_by_head_exits_output_closed_and_says_nothing_more(tmp_path: Path) -> None:
    a = copy_run(SAMPLE, tmp_path / "a")
    slower = edited_run(SAMPLE, tmp_path / "b", scale_latencies(3.0))  # a line per changed figure: > 4 KiB
    code, line, stderr = first_line_then_close("compare", str(a), str(slower), "--out", str(tmp_path / "out"))
    assert line.startswith((b"REGRESSION", b"CHANGED", b"~")), line  # a verdict line, then the reader is gone
    assert code == 141 == EXIT_OUTPUT_CLOSED != EXIT_SLO_FAILED, stderr
    assert stderr == "", stderr  # no traceback, no "Exception ignored", no error line


def test_help_to_a_reader_already_gone_exits_output_closed() -> None:
    code, _, stderr = first_line_then_close("run", "--help", close_at_once=True)
    assert code == EXIT_OUTPUT_CLOSED and stderr == "", stderr


class _Broken:
    """A stdout whose reader is gone."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_another_threads_line_marks_it_and_the_main_threads_next_line_stops_the_work(monkeypatch) -> None:
    monkeypatch.setattr(output._Stdout, "closed", False)
    monkeypatch.setattr(output._Stdout, "raised", False)
    monkeypatch.setattr(sys, "stdout", _Broken())
    watcher = threading.Thread(target=output.say, args=("event: etcd answered again",))
    watcher.start()
    watcher.join()
    assert output.output_closed()  # the watcher thread went on: it raised nothing
    with pytest.raises(output.OutputClosed):
        output.say("step 2/3: measuring")
    output.say("teardown: stopped etcd")  # once only: teardown's own lines go nowhere, quietly


def test_an_error_line_to_a_reader_already_gone_exits_output_closed(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `loadtest compare ... 2>&1 | true`: nobody reads the error line
    proc = subprocess.run([sys.executable, "-m", "loadtests.cli.main", "compare", str(tmp_path / "none"),
                           str(tmp_path / "none"), "--out", str(tmp_path / "out")], cwd=REPO, stdout=write_end,
                          stderr=write_end, stdin=subprocess.DEVNULL, timeout=120, check=False)
    os.close(write_end)
    assert proc.returncode == EXIT_OUTPUT_CLOSED
