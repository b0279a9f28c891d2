"""Nodes joining while a step is measured: all at once (a burst) or spread evenly over `over_s` seconds.

The control plane's answer to a burst (the baseline load's latency, 429s, priority-and-fairness waits) is
only visible while the join happens, so it runs inside the measured window, in batches of at most one per
second, each through the fleet's own scale-and-wait.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from loadtests.config.plan import Join
from loadtests.run.fleet import Fleet


def batch_targets(base: int, join: Join) -> list[tuple[float, int]]:
    """(seconds after the start, node count to reach) per batch: one batch when over_s is 0, else one a
    second (fewer when there are fewer nodes than seconds), the last reaching base + join.nodes."""
    if join.nodes <= 0:
        return []
    batches = 1 if join.over_s <= 0 else max(1, min(join.nodes, math.ceil(join.over_s)))
    interval = join.over_s / batches if batches > 1 else 0.0
    return [(k * interval, base + round(join.nodes * (k + 1) / batches)) for k in range(batches)]


class NodeJoin:
    """Runs the batches in a thread; `finish` waits (bounded) and says what happened, for the step's notes."""

    def __init__(self, fleet: Fleet, base: int, join: Join, timeout_s: float,
                 progress: Callable[[str], None] | None = None) -> None:
        self.fleet, self.base, self.join, self.timeout_s = fleet, base, join, timeout_s
        self.progress = progress
        self.seconds: float | None = None  # from the first create to the last node Ready
        self.error: str | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.join.nodes <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="node-join", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            for at_s, count in batch_targets(self.base, self.join):
                time.sleep(max(0.0, started + at_s - time.monotonic()))
                self.fleet.scale_nodes(count, timeout_s=max(1.0, self.timeout_s - (time.monotonic() - started)))
            self.seconds = time.monotonic() - started
        except Exception as error:  # said in the step's notes; the step's own figures still stand
            self.error = f"{type(error).__name__}: {error}"

    def finish(self) -> list[str]:
        """Wait for the join (at most its timeout) and return the notes it leaves on the step."""
        if self._thread is None:
            return []
        self._thread.join(timeout=self.timeout_s)
        how = "at once" if self.join.over_s <= 0 else f"spread over {self.join.over_s:g} s"
        if self._thread.is_alive():
            return [f"node join: {self.join.nodes} nodes {how} were not all Ready within {self.timeout_s:.0f} s"]
        if self.error:
            return [f"node join: {self.join.nodes} nodes {how} failed: {self.error}"]
        return [f"node join: {self.join.nodes} nodes joined {how} during the window, all Ready "
                f"{self.seconds:.1f} s after the first was created"]
