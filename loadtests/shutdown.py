"""Signals and teardown: the first terminating signal interrupts the work, and teardown then runs to its end.

Every signal whose default action ends the process is an interrupt, not only Ctrl-C (SIGINT) and SIGTERM: a
terminal or ssh session that closes sends SIGHUP, Ctrl-\\ SIGQUIT, some CI runners cancel a step with SIGHUP,
a resource limit sends SIGXCPU or SIGXFSZ. Left to their default action they end the harness with no message,
no report, and the cluster folder (keys, kubeconfigs, etcd's data) on disk.

A CI runner that times out sends SIGTERM and, a second later, another; a user presses Ctrl-C twice. Neither
may cut a teardown short (that is how processes get left behind), so while teardown runs (`shielded()`),
signals are counted, not raised. The third one forces an exit, and says exactly what is still running, by
pid, so nothing is left that cannot be found.

A fault found by another thread (a hung component) interrupts the main thread through `interrupt_main`,
which wakes it from any blocking call, unless it is already tearing down.

Python runs a signal's handler at the main thread's next step, wherever that is; when it is code whose exceptions
cannot propagate (the hooks Python runs around a fork, as every `preexec_fn` child's start does; a `__del__`),
the interrupt would be printed as "Exception ignored" and lost, and the run would go on to its end. Such an
interrupt is caught on its way to `sys.unraisablehook` and raised again a step later.
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

from loadtests.errors import LoadTestError

FORCE_AFTER = 3  # signals; the first interrupts, later ones during teardown are counted until this one
_FAULT_SIGNAL = signal.SIGUSR1
# every signal whose default action terminates the process and that comes from outside it (not a fault of the
# process itself, as SIGSEGV or SIGABRT are); SIGPIPE is left as Python sets it (ignored: a BrokenPipeError)
TERMINATING = tuple(getattr(signal, name) for name in (
    "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR2", "SIGALRM", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF",
    "SIGPWR") if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    """A terminating signal reached the harness: stop the work, tear down, and say which signal it was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    """"SIGHUP" for 1; "signal 99" for a number with no name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def ended_how(code: int | None) -> str:
    """How a process the harness watched ended, in the same words for each (components, Locust, a remote
    worker): "killed by SIGKILL" for a negative code (Popen's way of saying a signal ended it), "exited (code
    2)", or "exited" when its code is not ours to read (a process another harness started)."""
    if code is None:
        return "exited"
    return f"killed by {signal_name(-code)}" if code < 0 else f"exited (code {code})"


def interrupt_reason(error: KeyboardInterrupt) -> str:
    """"interrupted by the user (Ctrl-C)", "interrupted by SIGHUP (the terminal or session closed)", ...: what
    ended the run, in the words of its one line."""
    signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
    why = {signal.SIGINT: "the user (Ctrl-C)", signal.SIGTERM: "SIGTERM (a stop request, e.g. a CI timeout)",
           signal.SIGHUP: "SIGHUP (the terminal or session closed, or the CI step was cancelled)",
           signal.SIGQUIT: "SIGQUIT (Ctrl-\\)"}.get(signum, signal_name(signum))
    return f"interrupted by {why}"


class FaultInterrupt(BaseException):
    """Raised in the main thread to stop it where it is; a BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way (a probe that must not fail alone) swallows it. The fault itself is taken
    with `take_fault()`."""


def _ignore_late_signals() -> None:
    """As the process exits, its teardown done and its exit code decided: a stop request now (a CI runner's second
    SIGTERM a second after the first) is ignored. Python's finalization puts a handled signal back to its default
    action, which would kill the process and replace the exit code with the signal's."""
    for signum in TERMINATING:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_IGN)


class Shutdown:
    def __init__(self) -> None:
        self.signals = 0
        self._shield = 0
        self._fault: LoadTestError | None = None
        self._lost: BaseException | None = None  # an interrupt raised where it could not propagate
        self._unraisable_before: Callable[[object], object] | None = None
        self._leftovers: list[Callable[[], list[str]]] = []
        self._lock = threading.Lock()

    def install(self) -> None:
        """Handle every terminating signal (and the fault signal) in the main thread. SIGINT and SIGTERM always;
        another that the harness was started with ignored stays ignored (`nohup` ignores SIGHUP: that was asked
        for)."""
        for signum in TERMINATING:
            if signum not in (signal.SIGINT, signal.SIGTERM) and signal.getsignal(signum) == signal.SIG_IGN:
                continue
            signal.signal(signum, self._on_signal)
        signal.signal(_FAULT_SIGNAL, self._on_fault)
        if self._unraisable_before is None:
            self._unraisable_before = sys.unraisablehook
            sys.unraisablehook = self._on_unraisable
            atexit.register(_ignore_late_signals)


    def _on_unraisable(self, unraisable: object) -> None:
        """An interrupt raised where it could not propagate comes here instead of being lost, and is raised again
        once the main thread is out of that code. Everything else goes where it went before."""
        error = getattr(unraisable, "exc_value", None)
        if isinstance(error, Interrupted | FaultInterrupt) and threading.current_thread() is threading.main_thread():
            again = self._lost is None
            self._lost = error
            if again:  # not threading.Thread: its start() waits, and this must return first
                _thread.start_new_thread(self._raise_lost_again, ())
            return
        (self._unraisable_before or sys.__unraisablehook__)(unraisable)  # type: ignore[arg-type]

    def _raise_lost_again(self) -> None:
        """In a thread of its own: signal the main thread until its handler has raised the lost interrupt (a
        handler that lands in code that swallows it again sends it back to `_on_unraisable`). A few ms apart,
        so the main thread gets past the code that swallowed it; further apart while a teardown holds it."""
        main = threading.main_thread().ident or 0
        pause_s = 0.005
        while True:
            time.sleep(pause_s)
            pause_s = min(pause_s * 2, 0.2)
            if self._lost is None:
                return
            with contextlib.suppress(OSError, ValueError):  # the main thread has ended: nothing left to stop
                signal.pthread_kill(main, _FAULT_SIGNAL)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signals += 1
        if signum == signal.SIGHUP:  # the terminal may be gone: writing to it fails, and teardown must not
            sys.stdout, sys.stderr = _Tolerant(sys.stdout), _Tolerant(sys.stderr)
        if not self._shield:
            raise Interrupted(signum)
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

    @property
    def tearing_down(self) -> bool:
        """Whether teardown runs now (inside `shielded()`): nothing may be raised into it."""
        return self._shield > 0

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
        if self._shield:
            return
        if self._lost is not None and _frame is not None and getattr(_frame, "f_code", None) is _REROUTE:
            return  # still inside _on_unraisable: the next signal of _raise_lost_again raises it
        if self._lost is not None:  # raised again where it can propagate (or swallowed again, and back here)
            lost, self._lost = self._lost, None
            raise lost
        if self._fault is not None:
            raise FaultInterrupt(str(self._fault))

    def take_fault(self) -> LoadTestError | None:
        """The fault raised (or pending), once; clears it for the next run."""
        with self._lock:
            fault, self._fault = self._fault, None
        return fault


class _Tolerant:
    """A text stream whose writes never fail: after SIGHUP the terminal may be gone (EIO), and a message that
    cannot be shown must not stop the teardown that follows it."""

    def __init__(self, stream: object) -> None:
        self._stream = stream._stream if isinstance(stream, _Tolerant) else stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)  # type: ignore[attr-defined,no-any-return]
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _safely(report: Callable[[], list[str]]) -> list[str]:
    try:
        return report()
    except Exception as error:  # a forced exit must still say something
        return [f"(unknown: {error})"]


_REROUTE = Shutdown._on_unraisable.__code__
SHUTDOWN = Shutdown()
