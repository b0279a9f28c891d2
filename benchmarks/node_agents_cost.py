"""What the old load left out of a node: the default plan's load at N nodes with the old node watchers (one JSON pod
watch per node, as the load's user: `kubelet_watchers`) and with node agents like a real node's (`node_agents`:
every watch of a kubelet and a kube-proxy, in protobuf, each kubelet as its node), side by side in pairs.

Each run is `loadtest run` of one step on a fresh control plane; the pairs alternate their order (old-new,
new-old, ...), so a steady drift of the machine falls on both sides. Per run, over the measured window:
kube-apiserver's CPU (psutil) and its memory at the window's end (process_resident_memory_bytes), the watches open
(apiserver_longrunning_requests, verb WATCH), the watch events it sent and their bytes (apiserver_watch_events_total,
apiserver_watch_events_sizes), and the load generator's CPU. Each run's
results.json is kept gzip-compressed in benchmarks/results/raw/node_agents_cost_<nodes>/.

    .venv/bin/python benchmarks/node_agents_cost.py [--nodes 500] [--pairs 3] [--duration-s 60]

Written: benchmarks/results/node_agents_cost_<nodes>.md, and loadtests/data/sizing.json's node agents' cost per node.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.pairs import second_first, test_line  # noqa: E402
from benchmarks.plan_runs import default_load_plan  # noqa: E402
from benchmarks.recorded import raw_run_folder  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.config import plan as plan_mod  # noqa: E402
from loadtests.config import sizing  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RAW = "node_agents_cost_{nodes}"  # under benchmarks/results/raw/, one folder per scale
OLD, NEW = "kubelet_watchers", "node_agents"
Row = dict[str, Any]


def load_of(side: str) -> dict[str, Any]:
    """The default plan's load with its node watchers as `side` says (the rest unchanged)."""
    load = {name: params for name, params in plan_mod.load("default").load.items() if name != OLD}
    load[side] = {} if side == NEW else plan_mod.load("default").load[OLD]
    return load


def figures(step: Any, side: str, nodes: int) -> Row:
    """One run's figures, per node where they grow with nodes."""
    processes = {p.component: p for p in step.processes}
    apiserver = processes["kube-apiserver"]
    rate = next(r for r in step.rates if r.scenario == side)
    loadgen = next((p for p in step.processes if p.component.startswith("load")), None)
    scalars = step.apiserver
    return {"side": side, "nodes": nodes, "cpu_percent": apiserver.cpu_percent,
            "rss_mib": (scalars.get("resident_memory_bytes") or apiserver.rss_end_bytes) / 2**20,
            "watchers": scalars.get("watchers"), "watch_events": scalars.get("watch_events"),
            "watch_bytes": scalars.get("watch_event_bytes"), "asked": rate.asked_per_s,
            "achieved": rate.achieved_per_s, "load_cpu_percent": loadgen.cpu_percent if loadgen else None,
            "load_rss_mib": loadgen.rss_max_bytes / 2**20 if loadgen else None,
            "machine": step.machine_cpu_percent, "window_s": step.duration_s}


def run_once(folder: Path, nodes: int, duration_s: float, side: str, index: int) -> Row:
    out = folder / f"run-{index}-{side}"
    plan = default_load_plan(folder, f"agents-{side}", nodes, duration_s, load={"scenarios": load_of(side)},
                             target={"kind": "local", "heartbeat_factor": 1, "identities": "production"})
    subprocess.run([str(REPO / ".venv/bin/loadtest"), "run", "--plan", str(plan), "--out", str(out), "--no-gate"],
                   check=True, stdout=subprocess.DEVNULL)
    keep_raw(f"{RAW.format(nodes=nodes)}/{out.name}.results.json.gz", (out / results.RESULTS_FILE).read_bytes())
    return figures(results.load(out).steps[0], side, nodes)


def from_raw(nodes: int) -> list[Row]:
    """The rows of a measurement already made, from the runs kept in its raw folder, in the order they ran."""
    found = sorted((RAW_DIR / RAW.format(nodes=nodes)).glob("run-*.results.json.gz"),
                   key=lambda path: int(path.name.split("-")[1]))
    rows = []
    with tempfile.TemporaryDirectory(prefix="node-agents-cost-") as tmp:
        for path in found:
            side = NEW if NEW in path.name else OLD
            run = results.load(raw_run_folder(path, Path(tmp) / path.name))
            rows.append(figures(run.steps[0], side, nodes))
    return rows


def _num(value: float | None, fmt: str) -> str:
    return "not measured" if value is None else format(value, fmt)


def table(rows: list[Row]) -> list[str]:
    lines = []
    for index, row in enumerate(rows, 1):
        n = row["nodes"]
        per_node_kib = row["watch_bytes"] / n / 1024 if row["watch_bytes"] is not None else None
        lines.append(
            f"| {index} | {'new: node agents' if row['side'] == NEW else 'old: one pod watch'} | "
            f"{row['cpu_percent']:.1f} % | {row['rss_mib']:.0f} MiB | {_num(row['watchers'], ',.0f')} | "
            f"{_num(row['watch_events'], ',.0f')} | {row['achieved']:,.0f} of {row['asked']:,.0f} | "
            f"{_num(per_node_kib, ',.1f')} KiB | {_num(row['load_cpu_percent'], '.1f')} % | "
            f"{_num(row['machine'], '.0f')} % |")
    return lines


def pairs_of(rows: list[Row]) -> list[tuple[Row, Row]]:
    return [(a, b) if a["side"] == OLD else (b, a) for a, b in zip(rows[0::2], rows[1::2], strict=True)]


def summary(rows: list[Row]) -> list[str]:
    pairs = pairs_of(rows)
    nodes = rows[0]["nodes"]

    def per_node(key: str, scale: float = 1.0) -> list[float]:
        return [(new[key] - old[key]) * scale / nodes for old, new in pairs
                if new[key] is not None and old[key] is not None]

    old = [o for o, _ in pairs]
    new = [n for _, n in pairs]

    def median(side: list[Row], key: str) -> float:
        return statistics.median(r[key] for r in side if r[key] is not None)

    lines = ["", f"Medians over the pairs, new / old: kube-apiserver CPU {median(new, 'cpu_percent'):.1f} % / "
                 f"{median(old, 'cpu_percent'):.1f} % of a core; memory {median(new, 'rss_mib'):.0f} / "
                 f"{median(old, 'rss_mib'):.0f} MiB; watches open {median(new, 'watchers'):,.0f} / "
                 f"{median(old, 'watchers'):,.0f}; watch events sent {median(new, 'watch_events'):,.0f} / "
                 f"{median(old, 'watch_events'):,.0f} in the window."]
    lines += ["", "What the old load left out, per node (new − old of each pair, divided by the nodes):",
              "- " + test_line(per_node("cpu_percent", 10_000.0), "kube-apiserver CPU", "millicores per 1,000 nodes",
                               "the node agents cost the apiserver more CPU"),
              "- " + test_line(per_node("rss_mib", 1024.0), "kube-apiserver memory", "KiB per node",
                               "the node agents cost the apiserver more memory"),
              "- " + test_line(per_node("watchers"), "watches open", "per node", "more watches"),
              "- " + test_line(per_node("watch_events"), "watch events sent in the window", "per node",
                               "more watch events"),
              "- " + test_line(per_node("watch_bytes", 1 / 1024), "watch traffic the apiserver sent in the window",
                               "KiB per node", "more watch traffic")]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/node_agents_cost_<nodes>.md")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept runs, run nothing")
    parser.add_argument("--more", action="store_true",
                        help="add --pairs pairs to the kept runs instead of starting over")
    parser.add_argument("--record", action=argparse.BooleanOptionalAction, default=True,
                        help="write the cost per node into loadtests/data/sizing.json (the sizing check's)")
    args = parser.parse_args()
    args.out = args.out or Path(__file__).parent / "results" / f"node_agents_cost_{args.nodes}.md"
    kept = from_raw(args.nodes) if args.from_raw or args.more else []
    rows = kept if args.from_raw else kept + measure(args, first=len(kept))
    args.pairs = len(rows) // 2
    write(args, rows)
    if args.record and not args.from_raw:
        record_cost(rows, command(args))
    return 0


def measure(args: argparse.Namespace, first: int = 0) -> list[Row]:
    """`args.pairs` pairs of runs, numbered on from `first` (the runs kept so far; none: an earlier measurement's
    runs are removed first)."""
    if not first:
        for old in (RAW_DIR / RAW.format(nodes=args.nodes)).glob("*.results.json.gz"):
            old.unlink()
    rows = []
    with tempfile.TemporaryDirectory(prefix="node-agents-cost-") as tmp:
        for index in range(first, first + 2 * args.pairs):
            side = NEW if second_first(index) else OLD
            row = run_once(Path(tmp), args.nodes, args.duration_s, side, index)
            rows.append(row)
            print(f"run {index + 1}: {side}: kube-apiserver {row['cpu_percent']:.1f} % of a core, "
                  f"{row['rss_mib']:.0f} MiB, {row['watchers']} watches", flush=True)
    return rows


def command(args: argparse.Namespace) -> str:
    """The one command that makes all the rows (pairs added with --more count as made by it)."""
    return (f".venv/bin/python benchmarks/node_agents_cost.py --nodes {args.nodes} --pairs {args.pairs} "
            f"--duration-s {args.duration_s:g}")


def write(args: argparse.Namespace, rows: list[Row]) -> None:
    lines = results_head(
        f"Node agents against the old node watchers: the apiserver's cost per node, {args.nodes:,} nodes",
        f"the default plan's load, one {args.duration_s:.0f} s step per run, its `kubelet_watchers` (old) or "
        "`node_agents` (new) in pairs alternating old-new and new-old; `identities: production` (kwok as the nodes' "
        "kubelets, the load an ordinary user).",
        command(args),
        ["run", "node watchers", "kube-apiserver CPU", "kube-apiserver memory", "watches open", "watch events sent",
         "watches established of asked", "watch traffic sent per node", "load generator CPU", "machine CPU"])
    lines += table(rows) + summary(rows)
    lines += ["", "CPU: psutil over the measured window, 100 % = one core. Memory: process_resident_memory_bytes at "
                  "the window's end. Watches open: apiserver_longrunning_requests (WATCH) at the window's end, every "
                  "client's. Watch events and traffic: apiserver_watch_events_total and the sum of "
                  "apiserver_watch_events_sizes over the window, every watcher's, divided by the nodes.",
              "", f"Raw results (each run's results.json): benchmarks/results/raw/{RAW.format(nodes=args.nodes)}/."]
    write_results(args.out, lines)


def record_cost(rows: list[Row], command: str) -> None:
    """What a node's agents add per node, for the sizing check: the median over the pairs of the apiserver's and
    the load generator's CPU and memory, new − old."""
    pairs, nodes = pairs_of(rows), rows[0]["nodes"]
    cores = [((n["cpu_percent"] - o["cpu_percent"]) + ((n["load_cpu_percent"] or 0) - (o["load_cpu_percent"] or 0)))
             / 100 * 1000 / nodes for o, n in pairs]
    mib = [(n["rss_mib"] - o["rss_mib"]) + ((n["load_rss_mib"] or 0) - (o["load_rss_mib"] or 0)) for o, n in pairs]
    sizing.record(sizing.NODE_AGENTS, {
        "cores_per_1000_nodes": statistics.median(cores), "bytes_per_node": statistics.median(mib) * 2**20 / nodes,
        "by_pair": {"cores_per_1000_nodes": cores, "mib": mib}, "nodes": nodes,
        "what": "kube-apiserver's and the load generator's CPU and memory with node agents less with one pod watch "
                "per node, the default load, per node"}, command)


if __name__ == "__main__":
    sys.exit(main())
