"""A run a full disk ended says the disk once, then what failed on it; a warning about logs that could not be kept
gives the reason the copy failed, never "None"."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from loadtests.errors import EnvironmentProblem, RunAborted, TargetError, full_disk_line, os_reason

FULL = "disk full: /r has 0 bytes free"


def test_a_full_disk_that_is_itself_the_cause_is_said_once() -> None:
    line = full_disk_line(FULL, EnvironmentProblem(FULL))
    assert line == FULL
    assert line.count("disk full") == 1 and "EnvironmentProblem" not in line


def test_a_refused_write_that_names_the_disk_is_said_once() -> None:
    said = f"{FULL} (no space left on device)"
    assert full_disk_line(FULL, said) == said


def test_what_failed_on_the_disk_follows_it() -> None:
    died = RunAborted("etcd exited (code 2): failed to open database: no space left on device; full log: /r/etcd.log")
    assert full_disk_line(FULL, died) == f"{FULL}; {died}"
    assert full_disk_line(FULL, TargetError("etcd ready: etcd exited (code 2)")) == \
        f"{FULL}; etcd ready: etcd exited (code 2)"


def test_an_error_not_of_the_harness_keeps_its_type() -> None:
    refused = OSError(errno.ENOSPC, "No space left on device", "/r/results.json.tmp")
    assert full_disk_line(FULL, refused) == f"{FULL}; OSError: [Errno 28] No space left on device: " \
                                           "'/r/results.json.tmp'"


def test_the_line_stays_short() -> None:
    assert len(full_disk_line(FULL, "x" * 2000)) == 600


def test_an_os_error_says_its_reason() -> None:
    assert os_reason(OSError(errno.ENOSPC, "No space left on device")) == "No space left on device"


def test_a_copy_that_failed_file_by_file_says_the_first_reason_and_how_many_more() -> None:
    failed = shutil.Error([("/c/logs/etcd.log", "/r/logs/etcd.log", "[Errno 28] No space left on device: '/r/logs/"
                                                                    "etcd.log'"),
                           ("/c/logs/kwok.log", "/r/logs/kwok.log", "[Errno 28] No space left on device")])
    assert failed.strerror is None
    assert os_reason(failed) == "No space left on device: '/r/logs/etcd.log' (and 1 more)"


def test_a_real_copy_refused_file_by_file_says_why(tmp_path: Path) -> None:
    """copytree gathers each file's failure into one shutil.Error, whose strerror is None: the "(None)" a
    warning used to say."""
    source = tmp_path / "logs"
    source.mkdir()
    (source / "etcd.log").write_text("x")
    (source / "kwok.log").symlink_to(tmp_path / "gone.log")  # a file that cannot be read
    with pytest.raises(OSError) as refused:
        shutil.copytree(source, tmp_path / "kept", dirs_exist_ok=True)
    assert refused.value.strerror is None
    assert os_reason(refused.value) == f"No such file or directory: '{source / 'kwok.log'}'"
