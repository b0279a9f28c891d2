"""What one ask over a kept connection costs the harness, side by side: the standard library's http.client (what
KeptConnection was written on) against kube/kept.py's own HTTP/1.1, each over one kept TLS connection to a fresh
local kube-apiserver, asks alternating between them, each after --sleep-s asleep as a health check or a probe's
write sleeps: a GET /livez (the health checks) and a merge PATCH of a ConfigMap (the watch-delay probe's write).
The figure is the asking thread's CPU per ask (CLOCK_THREAD_CPUTIME_ID around the ask), median and quartiles.

    .venv/bin/python benchmarks/kept_cost.py [--asks 60] [--sleep-s 0.5]

Written: benchmarks/results/kept_cost.md and benchmarks/results/raw/kept_cost.json.gz (every ask's CPU).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from benchmarks.plane import fleet_plane  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.kube.access import ClusterAccess  # noqa: E402
from loadtests.kube.kept import KeptConnection  # noqa: E402
from loadtests.measure.processes import machine_busy_seconds  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
NAMESPACE, CONFIGMAP = "default", "kept-cost"


class StandardLibrary:
    """The same asks on http.client's HTTPSConnection, kept: a request, its answer read whole."""

    def __init__(self, access: ClusterAccess) -> None:
        server = urlsplit(access.server)
        self.connection = http.client.HTTPSConnection(server.hostname or "", server.port,
                                                      context=access.ssl_context(), timeout=10)

    def send(self, method: str, url: str, *, body: bytes | None = None, headers: dict[str, str]) -> int:
        parts = urlsplit(url)
        self.connection.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body, headers)
        response = self.connection.getresponse()
        response.read()
        return response.status


def asks(access: ClusterAccess) -> dict[str, Callable[[object, int], int]]:
    """Each ask by name, for either client: (client, sequence number) -> status."""
    headers = {**access.auth_headers(), "Accept": "application/json", "User-Agent": "k8s-loadtest/benchmark"}
    patch_headers = {**headers, "Content-Type": "application/merge-patch+json"}
    configmap = f"{access.server}/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}"

    def livez(client: object, _seq: int) -> int:
        return _status(client.send("GET", f"{access.server}/livez", headers=headers))  # type: ignore[attr-defined]

    def patch(client: object, seq: int) -> int:
        body = json.dumps({"metadata": {"annotations": {"seq": str(seq)}}}).encode()
        return _status(client.send("PATCH", configmap, body=body, headers=patch_headers))  # type: ignore[attr-defined]

    return {"GET /livez": livez, "PATCH configmap": patch}


def _status(answer: object) -> int:
    return answer if isinstance(answer, int) else int(answer.status)  # type: ignore[attr-defined]


def measure(access: ClusterAccess, count: int, sleep_s: float) -> dict[str, dict[str, list[float]]]:
    """Every ask's thread CPU in µs, per ask and client; the clients take turns ask by ask."""
    clients = {"http.client": StandardLibrary(access), "kube/kept.py": KeptConnection(access.ssl_context())}
    found: dict[str, dict[str, list[float]]] = {}
    for ask_name, ask in asks(access).items():
        found[ask_name] = {name: [] for name in clients}
        for seq in range(count):
            for name, client in (clients.items() if seq % 2 else reversed(clients.items())):
                time.sleep(sleep_s)
                started = time.thread_time_ns()
                status = ask(client, seq)
                found[ask_name][name].append((time.thread_time_ns() - started) / 1000)
                assert status == 200, (ask_name, name, status)
    return found


def table(found: dict[str, dict[str, list[float]]]) -> list[str]:
    rows = []
    for ask_name, by_client in found.items():
        medians = {name: statistics.median(values) for name, values in by_client.items()}
        for name, values in by_client.items():
            q1, _, q3 = statistics.quantiles(values, n=4)
            ratio = medians[name] / medians["http.client"]
            rows.append(f"| {ask_name} | {name} | {medians[name]:,.0f} µs | {q1:,.0f}-{q3:,.0f} µs | {ratio:.2f}x | "
                        f"{len(values)} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=60, help="asks of each kind per client")
    parser.add_argument("--sleep-s", type=float, default=0.5, help="asleep before each ask")
    args = parser.parse_args()
    with fleet_plane("kept-cost", 0, binaries.find()) as plane:
        access = plane.info.access
        plane.client.create(f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                            {"metadata": {"name": CONFIGMAP}, "data": {}}, exist_ok=True)
        busy_before, started = machine_busy_seconds()[0], time.monotonic()
        found = measure(access, args.asks, args.sleep_s)
        busy = 100 * (machine_busy_seconds()[0] - busy_before) / (time.monotonic() - started)
    command = f".venv/bin/python benchmarks/kept_cost.py --asks {args.asks} --sleep-s {args.sleep_s:g}"
    lines = results_head("One ask over a kept connection: the harness's CPU, http.client against kube/kept.py",
                         f"a fresh local kube-apiserver over TLS on loopback; asks alternate between the clients, "
                         f"each after {args.sleep_s:g} s asleep; machine CPU over the measurement {busy:.0f} % of "
                         f"200 % (others work on this machine too)", command,
                         ["ask", "client", "thread CPU per ask (median)", "quartiles", "of http.client's", "asks"])
    lines += table(found)
    lines += ["", "Thread CPU: CLOCK_THREAD_CPUTIME_ID around each ask (the request written, its answer read whole).",
              "Raw: benchmarks/results/raw/kept_cost.json.gz (every ask's CPU in µs)."]
    keep_raw("kept_cost.json.gz", {"command": command, "machine_cpu_percent": busy, "asks_us": found})
    write_results(RESULTS / "kept_cost.md", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
