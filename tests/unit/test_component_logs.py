"""A component's own error line, picked out of logs the real binaries wrote (tests/unit/data/*.log: etcd on a
full disk and with a bad flag, kube-apiserver with a bad flag, kube-scheduler with a missing kubeconfig, kwok with
no stages), and the one line a group of processes gives for an exit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loadtests.controlplane.logs import ERROR, FATAL, classify, error_line, last_line
from loadtests.controlplane.processes import ClusterState, ProcessGroup, exit_text, wait_for
from loadtests.shutdown import ended_how

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("log", "expected"), [
    ("etcd_v3.6.16_disk_full.log",
     "failed to open database: write /tmp/fullfs/etcd/member/snap/db: no space left on device"),
    ("etcd_v3.6.16_bad_flag.log", "flag provided but not defined: -bogus"),
    ("kube-apiserver_v1.37.2_bad_flag.log", "Error: unknown flag: --bogus"),
    ("kube-scheduler_v1.37.2_bad_kubeconfig.log", "command failed: stat /nonexistent: no such file or directory"),
    ("kwok_v0.8.0_no_stages.log", "Execute exit: no stages found"),
])
def test_the_error_line_of_each_components_log(log: str, expected: str) -> None:
    assert error_line(DATA / log) == expected


def test_a_fatal_line_outranks_errors_and_the_first_fatal_is_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "kube-apiserver.log"
    log.write_text("E1201 10:00:00.000001    1 reflector.go:1] \"retrying\" err=\"connection refused\"\n"
                   "F1201 10:00:01.000001    1 server.go:9] storage backend unreachable\n"
                   "E1201 10:00:02.000001    1 run.go:72] \"command failed\" err=\"later\"\n"
                   "panic: repeated\n\ngoroutine 1 [running]:\nmain.main()\n")
    assert error_line(log) == "storage backend unreachable"
    assert last_line(log) == "main.main()"


def test_of_error_lines_the_last_one_is_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "kwok.log"
    log.write_text('{"level":"ERROR","msg":"first","err":"a"}\n{"level":"INFO","msg":"fine"}\n'
                   '{"level":"error","msg":"second","error":"b"}\n')
    assert error_line(log) == "second: b"


def test_a_python_processs_cause_is_its_uncaught_exception_or_its_last_logged_error(tmp_path: Path) -> None:
    """Locust's log: an uncaught exception (a traceback on its own) is fatal, the first of a chain being the cause;
    a traceback a logging line carries joins that line, with its severity (ERROR was survived, CRITICAL was not)."""
    log = tmp_path / "locust.log"
    survived = ("[2025-11-28 10:00:00,000] host/ERROR/locust.user.task: request failed\n"
                "Traceback (most recent call last):\n  File \"/x.py\", line 1, in task\nKeyError: 'pod'\n")
    log.write_text(survived + "[2025-11-28 10:00:02,000] host/INFO/locust.main: Shutting down (exit code 1)\n")
    assert error_line(log) == "request failed: KeyError: 'pod'"
    log.write_text(survived + "Traceback (most recent call last):\n  File \"/m.py\", line 3, in <module>\n"
                   "ValueError: bad scenario\n\nDuring handling of the above exception, another exception occurred:\n\n"
                   "Traceback (most recent call last):\n  File \"/m.py\", line 5, in <module>\nSystemExit: 1\n")
    assert error_line(log) == "ValueError: bad scenario"
    assert classify("[2025-11-28 10:00:01,000] host/CRITICAL/locust.runners: greenlet died") == (FATAL, "greenlet died")
    assert classify("[2025-11-28 10:00:01,000] host/WARNING/locust.runners: CPU usage above 90%") is None


def test_ordinary_lines_are_not_errors() -> None:
    assert classify('{"level":"warn","msg":"slow"}') is None
    assert classify("I1201 10:00:00.000001    1 x.go:1] fine") is None
    assert classify("not json {") is None
    assert classify('{"level":"panic","msg":"m","error":"e"}') == (FATAL, "m: e")
    assert classify('E1201 10:00:00.000001    1 x.go:1] plain words') == (ERROR, "plain words")


def test_no_log_and_an_empty_log(tmp_path: Path) -> None:
    assert error_line(tmp_path / "absent.log") is None
    (tmp_path / "empty.log").write_text("")
    assert exit_text(1, tmp_path / "empty.log") == f"exited (code 1); its log is empty: {tmp_path / 'empty.log'}"


@pytest.mark.parametrize(("code", "said"), [(-9, "killed by SIGKILL"), (-15, "killed by SIGTERM"),
                                            (-99, "killed by signal 99"), (2, "exited (code 2)"),
                                            (0, "exited (code 0)"), (None, "exited")])
def test_every_watched_process_ends_in_the_same_words(code: int | None, said: str) -> None:
    assert ended_how(code) == said


def test_no_process_is_said_to_exit_with_a_negative_code() -> None:
    """Locust and remote workers say their end as the components do (ended_how), not "exited with code -9"."""
    package = Path(__file__).resolve().parents[2] / "loadtests"
    for path in package.rglob("*.py"):
        text = path.read_text()
        assert "exited with code" not in text and "exit code {" not in text, path


def test_an_exit_names_its_code_or_signal_and_its_error_line(tmp_path: Path) -> None:
    log = DATA / "etcd_v3.6.16_disk_full.log"
    assert exit_text(2, log) == ("exited (code 2): failed to open database: write /tmp/fullfs/etcd/member/snap/db: "
                                 f"no space left on device; full log: {log}")
    assert exit_text(-9, log).startswith("killed by SIGKILL: failed to open database")
    plain = tmp_path / "plain.log"
    plain.write_text("starting\nbye\n")
    assert exit_text(0, plain) == f"exited (code 0); its log ends: bye; full log: {plain}"


def test_a_process_group_says_how_its_child_ended(tmp_path: Path) -> None:
    state = ClusterState(name="t", directory=str(tmp_path))
    group = ProcessGroup(state, tmp_path / "logs")
    record = group.start("etcd", [sys.executable, "-c", "import sys; print('Error: unknown flag: --x'); sys.exit(2)"])
    wait_for(lambda: group.exited(record) is not None, 30, "the child's exit")
    assert group.exited(record) == f"etcd exited (code 2): Error: unknown flag: --x; full log: {record.log}"
