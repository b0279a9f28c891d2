"""Signals and teardown: the first Ctrl-C or SIGTERM interrupts the work, and teardown then runs to its end.

A CI runner that times out sends SIGTERM and, a second later, another; a user presses Ctrl-C twice. Neither
may cut a teardown short (that is how processes get left behind), so while teardown runs (`shielded()`),
signals are counted, not raised. The third one forces an exit, and says exactly what is still running, by
pid, so nothing is left that cannot be found.

A fault found by another thread (a hung component) interrupts the main thread through `interrupt_main`,
which wakes it from any blocking call, unless it is already tearing down.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from loadtests.errors import LoadTestError

FORCE_AFTER = 3  # signals; the first interrupts, later ones during teardown are counted until this one
_FAULT_SIGNAL = signal.SIGUSR1


class FaultInterrupt(BaseException):
    """Raised in the main thread to stop it where it is; a BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way (a probe that must not fail alone) swallows it. The fault itself is taken
    with `take_fault()`."""


class Shutdown:
    def __init__(self) -> None:
        self.signals = 0
        self._shield = 0
        self._fault: LoadTestError | None = None
        self._leftovers: list[Callable[[], list[str]]] = []
        self._lock = threading.Lock()

    def install(self) -> None:
        """Handle SIGINT and SIGTERM (and the fault signal) in the main thread."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        signal.signal(_FAULT_SIGNAL, self._on_fault)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signals += 1
        if not self._shield:
            raise KeyboardInterrupt(f"signal {signum}")
        if self.signals >= FORCE_AFTER:
            self._force()
        print(f"loadtest: stopping everything it started (signal {self.signals} of {FORCE_AFTER} forces an "
              "exit)", file=sys.stderr, flush=True)

    def _force(self) -> None:
        left = [entry for report in self._leftovers for entry in _safely(report)]
        where = "; still running: " + ", ".join(left) if left else "; nothing was left running"
        print(f"loadtest: forced to exit during teardown{where}", file=sys.stderr, flush=True)
        os._exit(130)

    def track(self, report: Callable[[], list[str]]) -> Callable[[], None]:
        """Register what to name ("etcd (pid 123)") if an exit is forced; returns the way to unregister."""
        self._leftovers.append(report)
        return lambda: self._leftovers.remove(report) if report in self._leftovers else None

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """Teardown: signals (and faults) do not interrupt what runs inside."""
        self._shield += 1
        try:
            yield
        finally:
            self._shield -= 1

    # --- faults found by other threads ---------------------------------------------------------------

    def interrupt_main(self, fault: LoadTestError) -> None:
        """From another thread: raise `fault` in the main thread now (a blocked call returns with EINTR)."""
        with self._lock:
            if self._fault is not None:
                return
            self._fault = fault
        if threading.current_thread() is threading.main_thread():
            raise FaultInterrupt(str(fault))
        with contextlib.suppress(ValueError, OSError):  # no handler installed (library use): nothing to wake
            if signal.getsignal(_FAULT_SIGNAL) == self._on_fault:
                signal.pthread_kill(threading.main_thread().ident or 0, _FAULT_SIGNAL)

    def _on_fault(self, _signum: int, _frame: object) -> None:
        if self._fault is not None and not self._shield:
            raise FaultInterrupt(str(self._fault))

    def take_fault(self) -> LoadTestError | None:
        """The fault raised (or pending), once; clears it for the next run."""
        with self._lock:
            fault, self._fault = self._fault, None
        return fault


def _safely(report: Callable[[], list[str]]) -> list[str]:
    try:
        return report()
    except Exception as error:  # a forced exit must still say something
        return [f"(unknown: {error})"]


SHUTDOWN = Shutdown()
