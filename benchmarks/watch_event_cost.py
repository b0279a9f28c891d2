"""What one pod event costs the harness's own watch of the churn's pods (ClusterView's, which the health sampler and
the pod-startup probe read), its events handed on as each is read (batch_s 0) or in batches (HEALTH_BATCH_S).

Brings up a local control plane of `--nodes` idle kwok nodes, and a separate process (its CPU is not counted) that
creates `--rate` pods a second in the churn namespace and deletes each `--lifetime-s` later. Each round watches
the namespace with a fresh Watched in one mode, the modes alternating A/B, B/A, ... (benchmarks/pairs.py), and
reads the watch thread's CPU (/proc/self/task/<tid>/stat utime+stime; schedstat's run time beside it, in ns)
over `--seconds`, after `--warm-s` once its LIST and first events are through, and counts the events a listener
was handed.

    .venv/bin/python benchmarks/watch_event_cost.py [--nodes 100] [--rate 4] [--seconds 30] [--rounds 3]

Writes benchmarks/results/watch_event_cost.md and benchmarks/results/raw/watch_event_cost.json.gz.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from benchmarks.pairs import second_first  # noqa: E402
from benchmarks.plane import USER_AGENT, fleet_plane  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.kube import objects  # noqa: E402
from loadtests.kube.access import ClusterAccess  # noqa: E402
from loadtests.kube.errors import ApiError  # noqa: E402
from loadtests.kube.rest import RestClient  # noqa: E402
from loadtests.kube.watch import WatchEvent  # noqa: E402
from loadtests.measure.cluster_objects import HEALTH_BATCH_S, POD_FIELDS, Watched, pod_state, uid_of  # noqa: E402
from loadtests.measure.processes import machine_busy_seconds  # noqa: E402
from loadtests.polling import poll_until  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "watch_event_cost.md"
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def churn(access: ClusterAccess, rate: float, lifetime_s: float, stop: Any) -> None:
    """In a process of its own: `rate` pods a second created in the churn namespace, each deleted lifetime_s
    later, until `stop` is set."""
    client = RestClient(access, user_agent=f"{USER_AGENT}-churn")
    path = f"/api/v1/namespaces/{objects.NS_CHURN}/pods"
    alive: deque[tuple[float, str]] = deque()
    due = time.monotonic()
    while not stop.wait(max(0.0, due - time.monotonic())):
        due += 1 / rate
        try:
            made = client.create(path, objects.pod_manifest(None, objects.NS_CHURN, generate_name="cost-"))
            alive.append((time.monotonic(), made["metadata"]["name"]))
            while alive and time.monotonic() - alive[0][0] >= lifetime_s:
                client.delete(f"{path}/{alive.popleft()[1]}")
        except ApiError as error:  # keep the churn going; the listener's count says what came
            print(f"churn: {error}", file=sys.stderr)
    client.close()


def thread_cpu(native_id: int) -> tuple[float, int]:
    """A thread of this process: its utime+stime in seconds (clock ticks) and its run time in ns (schedstat)."""
    task = Path(f"/proc/self/task/{native_id}")
    fields = task.joinpath("stat").read_text().rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat
    return ticks * TICK_S, int(task.joinpath("schedstat").read_text().split()[0])


def one_round(access: ClusterAccess, batch_s: float, seconds: float, warm_s: float) -> dict[str, Any]:
    """One fresh watch of the churn's pods in one mode: its thread's CPU and the events it handed on."""
    client = RestClient(access, pool_size=2, user_agent=USER_AGENT)
    watched = Watched(client, "pods", pod_state, POD_FIELDS, namespace=objects.NS_CHURN, key=uid_of,
                      batch_s=batch_s)
    seen = [0]

    def count(_event: WatchEvent) -> None:
        seen[0] += 1

    watched.listen(count)
    watched.start()
    try:
        if not poll_until(lambda: watched.synced, 60.0):
            raise RuntimeError("the churn's pods were never listed")
        time.sleep(warm_s)  # its LIST and first watch events out of the window
        thread = watched._watch._thread
        assert thread is not None and thread.native_id is not None
        cpu_before, run_before = thread_cpu(thread.native_id)
        events_before, busy_before, started = seen[0], machine_busy_seconds()[0], time.monotonic()
        time.sleep(seconds)
        cpu_after, run_after = thread_cpu(thread.native_id)
        events, elapsed = seen[0] - events_before, time.monotonic() - started
        busy = machine_busy_seconds()[0] - busy_before
    finally:
        watched.stop()
        client.close()
    return {"batch_s": batch_s, "events": events, "seconds": elapsed, "cpu_s": cpu_after - cpu_before,
            "run_s": (run_after - run_before) / 1e9, "machine_cpu_percent": 100 * busy / elapsed}


def per_event_us(row: dict[str, Any], key: str = "cpu_s") -> float:
    return row[key] / row["events"] * 1e6 if row["events"] else float("nan")


def table(rows: list[dict[str, Any]], modes: tuple[float, float]) -> list[str]:
    lines = [f"| {i + 1} | {row['batch_s']:g} | {row['events']} | {row['events'] / row['seconds']:.1f} | "
             f"{per_event_us(row):.0f} | {per_event_us(row, 'run_s'):.0f} | "
             f"{100 * row['cpu_s'] / row['seconds']:.2f} % | {row['machine_cpu_percent']:.0f} % |"
             for i, row in enumerate(rows)]
    lines += ["", "| batch_s | rounds | µs/event (median, stat) | µs/event (median, schedstat) | "
              "% of a core (median) | machine CPU (median, of 200 %) |", "|---|---|---|---|---|---|"]
    for mode in modes:
        mine = [row for row in rows if row["batch_s"] == mode]
        lines.append(f"| {mode:g} | {len(mine)} | {statistics.median(per_event_us(r) for r in mine):.0f} | "
                     f"{statistics.median(per_event_us(r, 'run_s') for r in mine):.0f} | "
                     f"{statistics.median(100 * r['cpu_s'] / r['seconds'] for r in mine):.2f} % | "
                     f"{statistics.median(r['machine_cpu_percent'] for r in mine):.0f} % |")
    return lines


def measure(args: argparse.Namespace, bins: binaries.Binaries) -> list[dict[str, Any]]:
    """Every round, the modes alternating, on one plane under one churn."""
    modes = (0.0, args.batch_s)
    with fleet_plane("watch-event-cost", args.nodes, bins) as made:
        made.client.create("/api/v1/namespaces", objects.namespace_manifest(objects.NS_CHURN), exist_ok=True)
        spawn = multiprocessing.get_context("spawn")
        stop = spawn.Event()
        churner = spawn.Process(target=churn, args=(made.info.access, args.rate, args.lifetime_s, stop), daemon=True)
        churner.start()
        try:
            time.sleep(args.lifetime_s)  # the churn at its steady state: as many deleted as created
            rows = []
            for index in range(2 * args.rounds):
                row = one_round(made.info.access, modes[second_first(index)], args.seconds, args.warm_s)
                print(f"round {index + 1}: batch_s {row['batch_s']:g}: {row['events']} events, "
                      f"{per_event_us(row):.0f} µs/event", flush=True)
                rows.append(row)
        finally:
            stop.set()
            churner.join(timeout=30)
        return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rate", type=float, default=4.0, help="pods created (and deleted) a second")
    parser.add_argument("--lifetime-s", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warm-s", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each mode")
    parser.add_argument("--batch-s", type=float, default=HEALTH_BATCH_S)
    args = parser.parse_args()
    bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
    rows = measure(args, bins)
    command = (f".venv/bin/python benchmarks/watch_event_cost.py --nodes {args.nodes} --rate {args.rate:g} "
               f"--seconds {args.seconds:g} --rounds {args.rounds} --batch-s {args.batch_s:g}")
    lines = results_head(
        "What one pod event costs the harness's watch of the churn's pods, batched or not",
        f"{args.nodes:,} idle kwok nodes; {args.rate:g} pods/s created and deleted {args.lifetime_s:g} s later by "
        f"another process; per round a fresh watch (protobuf, ClusterView's fields), its thread's CPU over "
        f"{args.seconds:g} s after {args.warm_s:g} s, the modes alternating A/B, B/A, ...",
        command, ["round", "batch_s", "events", "events/s", "µs/event (stat)", "µs/event (schedstat)",
                  "% of a core", "machine CPU (of 200 %)"])
    lines += table(rows, (0.0, args.batch_s))
    lines += ["", "stat: utime+stime in clock ticks (10 ms each); schedstat: the thread's run time in ns, the finer "
              "figure. Raw: benchmarks/results/raw/watch_event_cost.json.gz."]
    keep_raw("watch_event_cost.json.gz", {"command": command, "args": vars(args), "rows": rows})
    write_results(RESULTS, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
