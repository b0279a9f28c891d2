"""The load generator's section of a step (load/generator.py, the runner's ClusterLoader2 phases): what the load
asked and got, client side, and each Locust worker's share.

Step keys (results.json), all times in seconds unless named (Locust's milliseconds), rates per second:

    client: list of ClientStat (Locust, per request type+name); content_bytes: the bytes of all its
        responses (absent in older files). A watcher scenario that counts what it receives (service_watchers)
        has a row of type RECV, named after its watch: one count per watch event, content_bytes their bytes;
        informers add rows of type SYNC, its "response time" the ms it took: each informer's first return to
        sync after a cut watch (from the cut, with the bytes received meanwhile; and the attempt that
        succeeded), one count an informer, and any later return (cut again after it was back in sync)
    rates: list of RateResult (per scenario: asked vs achieved per second); a watcher scenario that counts
        what it receives adds events and received_bytes: the watch events (BOOKMARKs included) and their
        bytes (the response body, newlines included) all its watchers received in the measured window
    workers: list of WorkerStat: each Locust worker's share of the window as its master counted it
        (worker: its address or host and pid; remote: from another machine (`loadtest worker`); requests,
        failures; cpu_seconds and cpu_percent (100 = one core) from its own reports around the window;
        lost_after_s: it disconnected or stopped answering this long after the window opened, else null)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClientStat:
    """Client-side latency of one request kind, as Locust measured it (milliseconds, as Locust reports)."""

    type: str
    name: str
    count: int
    failures: int
    rps: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    avg_ms: float | None = None
    content_bytes: int | None = None  # all its responses' bytes (Locust's count x average content size)

@dataclass
class RateResult:
    """What a scenario was asked to do per second, and what it achieved."""

    scenario: str
    asked_per_s: float | None
    achieved_per_s: float
    unit: str = "requests"
    per_second: bool = True  # False: a count (watches established), not a rate
    events: int | None = None  # watch events its watchers received in the window (scenarios that count them)
    received_bytes: int | None = None  # the bytes of those events

@dataclass
class WorkerStat:
    """One Locust worker's share of the measured window: a worker on another machine has no pid here to
    measure, so its master counts what it reports."""

    worker: str
    remote: bool = False
    requests: int = 0
    failures: int = 0
    cpu_seconds: float | None = None
    cpu_percent: float | None = None
    lost_after_s: float | None = None

@dataclass
class LoadgenSection:
    """The load generator's part of a step (empty: no load ran, or a saturated step)."""

    client: list[ClientStat] = field(default_factory=list)
    rates: list[RateResult] = field(default_factory=list)
    workers: list[WorkerStat] = field(default_factory=list)
