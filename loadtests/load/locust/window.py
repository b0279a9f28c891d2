"""When this process learned that the step's measured window opened, for load that follows the window (a replay's
timeline, config/timeline.py): the master or single process when the runner's window file appears, a worker when
the master tells it (locustfile.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class WindowClock:
    """The window's opening in epoch seconds; None until it opened."""

    opened_at: float | None = None

    def open(self) -> None:
        self.opened_at = time.time()


WINDOW = WindowClock()
