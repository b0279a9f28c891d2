"""Waiting for a condition, the one way every room waits: poll it until it holds or a deadline passes.

Threads and Locust's gevent processes use the same function: under gevent `time.sleep` yields to the other
greenlets (Locust patches it), so a wait never blocks a Locust process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def poll_until(condition: Callable[[], bool], timeout_s: float, *, interval_s: float = 0.2,
               abort: Callable[[], bool] | None = None) -> bool:
    """Whether `condition` came to hold within timeout_s (checked at once, then every interval_s); `abort`
    ends the wait early, as a miss, when it returns True (e.g. the process being waited on has exited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if abort is not None and abort():
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(interval_s, left))


def every(interval_s: float, stop: threading.Event, action: Callable[[], None]) -> None:
    """Call `action` now and then every interval_s until `stop` is set (a sampler's or a probe's thread): the
    cadence kept, never a burst of calls to catch up after a slow one."""
    due = time.monotonic()
    while not stop.wait(max(0.0, due - time.monotonic())):
        action()
        due = max(due + interval_s, time.monotonic())
