"""Is the API served, second by second? ClusterLoader2's APIAvailability in miniature, for a rolling upgrade.

A ticker sends `qps` reads a second through the cluster's own endpoint (the load balancer in front of several
apiservers), each on a small pool so that a slow answer does not hold back the next; every request is kept
with the second it was sent in, its answer (2xx, its code, or "connection") and how long it took. Beside it,
each apiserver's own /readyz once a second, as ClusterLoader2 polls each host. The figures say whose requests
they are: the probe's, not the load's.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from loadtests.controlplane.processes import http_ok
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.rest import RestClient
from loadtests.kube.retry import ONCE_ON_RESET
from loadtests.results.roll import ProbeSecond

PROBE_PATH = "/api/v1/namespaces/default"  # a read etcd serves (no resourceVersion: a quorum read)
PROBE_TIMEOUT_S = 5.0  # a probe not answered within this is not served
PROBE_USER_AGENT = "k8s-loadtest/availability-probe"
PROBE = f"GET {PROBE_PATH} (a quorum read), retried once on a reset connection as client-go does"


class AvailabilityProbe:
    """Start it when the window opens; `seconds()` after `stop()` gives one ProbeSecond per second sent in."""

    def __init__(self, access: ClusterAccess, apiservers: dict[str, str], qps: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.apiservers = apiservers
        self._clock = clock
        # not client-go's resends of a 429 or 5xx: each probe says what was answered in the second it was sent
        self._client = RestClient(access, pool_size=8, timeout_s=PROBE_TIMEOUT_S, user_agent=PROBE_USER_AGENT,
                                  retry=ONCE_ON_RESET)
        self._tls = access.ssl_context()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="availability-probe")
        self._answers: list[tuple[int, str, float]] = []  # (second, "ok" or what failed, seconds taken)
        self._ready: dict[str, list[bool]] = {name: [] for name in apiservers}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = 0.0
        self._threads: list[threading.Thread] = []

    def start(self, started: float | None = None) -> AvailabilityProbe:
        self._started = self._clock() if started is None else started
        self._threads = [threading.Thread(target=self._tick, name="availability-ticker", daemon=True),
                         threading.Thread(target=self._hosts, name="availability-hosts", daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def _tick(self) -> None:
        interval, k = 1.0 / self.qps, 0
        while not self._stop.is_set():
            due = self._started + k * interval
            if (wait := due - self._clock()) > 0 and self._stop.wait(wait):
                return
            self._pool.submit(self._send, int(max(0.0, due - self._started)))
            k += 1

    def _send(self, second: int) -> None:
        sent = self._clock()
        try:
            self._client.request("GET", PROBE_PATH)
            outcome = "ok"
        except ApiError as error:
            outcome = str(error.status) if error.status else "connection"
        with self._lock:
            self._answers.append((second, outcome, self._clock() - sent))

    def _hosts(self) -> None:
        k = 0
        while not self._stop.wait(max(0.0, self._started + k - self._clock())):
            for name, url in self.apiservers.items():
                ready = http_ok(f"{url}/readyz", self._tls)
                with self._lock:
                    self._ready[name].append(ready)
            k += 1

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=PROBE_TIMEOUT_S + 2)
        self._pool.shutdown(wait=True)  # every request sent has its answer (or its timeout)
        self._client.close()

    def seconds(self) -> list[ProbeSecond]:
        """One entry per second in which a probe was sent, in order."""
        with self._lock:
            answers = list(self._answers)
        return per_second(answers)

    def hosts_ready(self) -> dict[str, float]:
        """Each apiserver's share of seconds (0 to 1) in which its own /readyz answered."""
        with self._lock:
            return {name: round(sum(seen) / len(seen), 4) for name, seen in self._ready.items() if seen}


def per_second(answers: list[tuple[int, str, float]]) -> list[ProbeSecond]:
    """Probe answers (second sent, "ok" or what failed, seconds taken) folded into one entry per second."""
    by_second: dict[int, list[tuple[str, float]]] = {}
    for second, outcome, took in answers:
        by_second.setdefault(second, []).append((outcome, took))
    found = []
    for second in sorted(by_second):
        answered = by_second[second]
        served = [took for outcome, took in answered if outcome == "ok"]
        failed = Counter(outcome for outcome, _ in answered if outcome != "ok")
        found.append(ProbeSecond(t=second, sent=len(answered), served=len(served),
                                 slowest_s=round(max(served), 4) if served else None, failed=dict(failed)))
    return found
