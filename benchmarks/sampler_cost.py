"""What one health sample costs the harness, part by part: each /metrics page it scrapes (read over its kept
connection, its families found, parsed) and the LIST of the node Leases, in CPU time of the sampling thread.

Brings up a local control plane of `--nodes` idle kwok nodes (Leases renewed every 10 s, as kubelets do), then
repeats each part `--repeats` times (after one untimed round) and records the CPU per repeat (time.thread_time: this
thread only, so the control plane's own CPU is not in it). The health sampler does all of it every 5 s; the
table says what that is in % of one core. No load runs: the pages are an idle cluster's (a loaded apiserver's page
is larger), so this is where the time goes, not a step's figure (benchmarks/harness_cost.py measures those).

    .venv/bin/python benchmarks/sampler_cost.py [--nodes 1000] [--repeats 20]

Writes benchmarks/results/sampler_cost.md and benchmarks/results/raw/sampler_cost.json.gz.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from benchmarks.plane import fleet_plane  # noqa: E402
from loadtests.analysis.metrics import Snapshot, select_families  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.measure.cluster_health import DEFAULT_INTERVAL_S  # noqa: E402
from loadtests.measure.cluster_objects import LeaseLists  # noqa: E402
from loadtests.measure.component_metrics import metrics_sources  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "sampler_cost.md"


def cpu_ms(action: Callable[[], object], repeats: int) -> list[float]:
    """This thread's CPU per call of `action`, in ms, after one untimed call."""
    action()
    found = []
    for _ in range(repeats):
        started = time.thread_time()
        action()
        found.append((time.thread_time() - started) * 1000)
    return found


def measure(nodes: int, repeats: int, bins: binaries.Binaries) -> list[dict[str, object]]:
    """Each part's CPU per call on a fresh control plane of `nodes` idle nodes."""
    with fleet_plane("sampler-cost", nodes, bins) as made:
        rows: list[dict[str, object]] = []
        sources, _notes = metrics_sources(made.info, timeout_s=10.0)
        for source in sources:
            text, families = source.page.text(), source.families
            steps: dict[str, Callable[[], object]] = {
                "read": source.page.text,
                "families found": lambda t=text, f=families: select_families(t, f),  # type: ignore[misc]
                "parsed": lambda t=text, f=families: Snapshot.parse(t, families=f)}  # type: ignore[misc]
            rows += [{"part": f"{source.name} page", "step": step, "bytes": len(text),
                      "ms": cpu_ms(action, repeats)} for step, action in steps.items()]
        leases = LeaseLists(made.client)
        rows.append({"part": f"LIST of {nodes:,} Leases", "step": "read and reduced", "bytes": None,
                     "ms": cpu_ms(leases.refresh, repeats)})
        for source in sources:
            source.close()
        return rows


def table(rows: list[dict[str, object]]) -> list[str]:
    lines = []
    for row in rows:
        ms = row["ms"]
        assert isinstance(ms, list)
        median = statistics.median(ms)
        size = f"{row['bytes']:,}" if row["bytes"] is not None else ""
        lines.append(f"| {row['part']} | {row['step']} | {size} | {median:.2f} | {min(ms):.2f}-{max(ms):.2f} | "
                     f"{median / 1000 / DEFAULT_INTERVAL_S * 100:.2f} % |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
    rows = measure(args.nodes, args.repeats, bins)
    command = f".venv/bin/python benchmarks/sampler_cost.py --nodes {args.nodes} --repeats {args.repeats}"
    lines = results_head(
        "What one health sample costs the harness, part by part",
        f"{args.nodes:,} idle kwok nodes, no load; CPU of the sampling thread per call (time.thread_time), median "
        f"of {args.repeats} after one untimed; the last column: that part every {DEFAULT_INTERVAL_S:g} s, in % of "
        "one core",
        command, ["part", "step", "bytes", "CPU ms (median)", "min-max", "every 5 s"])
    lines += table(rows)
    lines += ["", "A page's three steps are measured apart: reading it (over its kept connection, TLS included), "
              "finding the families the sampler reads, and parsing them (which finds them again first, so the "
              "sampler pays read + parsed). Raw: benchmarks/results/raw/sampler_cost.json.gz."]
    keep_raw("sampler_cost.json.gz", {"command": command, "nodes": args.nodes, "rows": rows})
    write_results(RESULTS, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
