"""The one wait: a condition polled until it holds, a deadline passes or the wait is aborted."""

from __future__ import annotations

import time

import pytest

from loadtests.controlplane.processes import wait_for
from loadtests.errors import TargetError
from loadtests.polling import poll_until


def test_a_condition_that_comes_to_hold_ends_the_wait() -> None:
    calls = iter([False, False, True])
    assert poll_until(lambda: next(calls), 5.0, interval_s=0.001)
    assert next(calls, "used up") == "used up"  # asked exactly three times


def test_a_condition_that_never_holds_misses_at_the_deadline() -> None:
    started = time.monotonic()
    assert not poll_until(lambda: False, 0.05, interval_s=0.01)
    assert time.monotonic() - started >= 0.05


def test_an_abort_ends_the_wait_as_a_miss_before_the_deadline() -> None:
    started = time.monotonic()
    assert not poll_until(lambda: False, 60.0, interval_s=0.01, abort=lambda: True)
    assert time.monotonic() - started < 30.0


def test_wait_for_names_what_was_waited_for_and_why_it_ended() -> None:
    with pytest.raises(TargetError, match=r"^etcd ready: not reached within 0 s$"):
        wait_for(lambda: False, 0.02, "etcd ready", interval_s=0.005)
    with pytest.raises(TargetError, match=r"^etcd ready: etcd exited \(code 1\)$"):
        wait_for(lambda: False, 60.0, "etcd ready", abort=lambda: "etcd exited (code 1)")
    wait_for(lambda: True, 0.0, "at once")
