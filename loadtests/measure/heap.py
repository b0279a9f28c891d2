"""The harness's own heap held still through a measured window.

Python's cyclic garbage collector walks every object it tracks whenever enough new ones were made; with a 500- or
1,000-node step's nodes, pods and scrapes held, one full walk of 80-289 ms landed in every such window of the
default plan (`benchmarks/results/harness_cost_gc_window.md`), in whichever thread happened to allocate, with the
GIL held: every watch thread stalled that long takes its events late, and the pod startup and watch delay it times
grow by the pause. The objects alive as a window
opens are the run's own (views, plans, earlier steps' results); they do not become garbage inside the window. So
they are collected once before it opens and then frozen (gc.freeze: moved where no collection walks them), and
thawed when it closes, when the work after the window may walk them again. Refcounting frees what it always
did; only a cycle among the frozen objects waits for the thaw.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holds = 0  # windows holding the heap now (one at a time in practice; nested holds thaw at the last release)


def hold() -> None:
    """Collect, then freeze what is alive (the first hold only)."""
    global _holds
    with _lock:
        _holds += 1
        if _holds == 1:
            gc.collect()
            gc.freeze()


def release() -> None:
    """Thaw the heap at the last release; a release without a hold does nothing."""
    global _holds
    with _lock:
        if _holds == 0:
            return
        _holds -= 1
        if _holds == 0:
            gc.unfreeze()


def held() -> bool:
    return _holds > 0
