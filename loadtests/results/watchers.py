"""The watching probes' section of a step (measure/watchers.py): what they write, timed until a watch sees it.

Step keys (results.json), in seconds:

    pod_startup: Distribution (create -> Running, seen by a watch)
    watch_delay: Distribution (write -> event at a watcher)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadtests.results.distribution import Distribution


@dataclass
class WatchersSection:
    """Pod startup and watch delay (count 0: not measured)."""

    pod_startup: Distribution = field(default_factory=Distribution)
    watch_delay: Distribution = field(default_factory=Distribution)
