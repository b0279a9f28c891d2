"""The harness's node agents against real ones: what each fake node's kubelet and kube-proxy (`node_agents`) sent
per node per minute, read from the apiserver's audit log as `hollow_node.py` reads kubemark's hollow nodes, beside
the hollow nodes' recorded run (benchmarks/results/raw/hollow_node/) and the reference's long-run rates.

One `loadtest run` on a fresh control plane with its audit log on: N nodes with P pods each (kwok's), the
`node_agents` scenario alone, a window as long as the hollow nodes' (5 minutes). Each node's heartbeats are kwok's
(one client for every node): its Lease PUTs and node status PATCHes are counted for the node they name and shown
as the kubelet's, marked so. The harness's pods reference one ConfigMap each (kube-root-ca.crt, through the token
volume) and no Secret, where the hollow run's referenced two and one: the reference's columns are evaluated for
each run's own counts.

    .venv/bin/python benchmarks/node_agents_fidelity.py [--nodes 3] [--pods-per-node 3] [--window-s 300]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import hollow_audit as ha  # noqa: E402
from benchmarks import hollow_report  # noqa: E402
from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.config.node_agents import REFERENCE  # noqa: E402
from loadtests.controlplane.pki import KWOK_USER  # noqa: E402
from loadtests.kube.objects import node_name  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RAW = "node_agents_fidelity"  # under benchmarks/results/raw/
HOLLOW = RAW_DIR / "hollow_node" / "summary.json.gz"
CONFIGMAPS, SECRETS = 1, 0  # what each harness node's pods reference (kube-root-ca.crt in their one namespace)
HEARTBEATS = {("PUT", "leases", "", "resource"), ("PATCH", "nodes", "status", "resource")}
SAME = 0.10  # within 10 % of the expected rate
# differences the harness's agents have on purpose, named where a row shows them (docs/node-agents.md says why)
NAMED = {("POST", "serviceaccounts", "token", "resource"):
         "named: a pod's token is not refreshed (the reference's rate is that refresh, every 48 min of a pod's life)"}


@dataclass
class Measured:
    """What hollow_report's tables read of a run: its nodes, pods per node and window (epoch seconds)."""

    nodes: list[str]
    pods_per_node: int
    timeline: dict[str, float] = field(default_factory=dict)


def plan_file(folder: Path, nodes: int, pods: int, window_s: float) -> Path:
    data = {"name": "node-agents-fidelity", "target": {"kind": "local", "heartbeat_factor": 1},
            "steps": [{"nodes": nodes, "pods_per_node": pods, "warmup_s": 30, "duration_s": window_s}],
            "load": {"scenarios": {"node_agents": {}}}, "audit": {"enabled": True}}
    path = folder / "node-agents-fidelity.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def kwok_heartbeats(requests: list[ha.Request], nodes: list[str], opened: float, closed: float) -> dict[Any, float]:
    """kwok's Lease PUTs and node status PATCHes per node per minute, counted for the node each names."""
    counts: Counter[tuple[str, str, str, str]] = Counter(
        r.key for r in requests if r.user == KWOK_USER and r.key in HEARTBEATS and r.name in nodes
        and opened <= r.received < closed)
    minutes = (closed - opened) / 60
    return {key: counts[key] / len(nodes) / minutes for key in sorted(HEARTBEATS)}


def hollow_rates() -> dict[tuple[str, tuple[str, ...]], float]:
    """The hollow nodes' per-node rates of their recorded run, by (agent, key)."""
    summary = json.loads(gzip.decompress(HOLLOW.read_bytes()))
    return {(row["agent"], tuple(row["key"])): row["mean"] for row in summary["steady"]}


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def verdict(row: dict[str, Any], measured: float) -> str:
    """Whether the harness's rate is the expected one within 10 %: a watch's against the renewals its own
    timeouts made due in this window, any other against the reference's long-run rate."""
    expected = row["due"] if row["key"][0] == "WATCH" else row["real"]
    if tuple(row["key"]) in NAMED and measured == 0:
        return NAMED[tuple(row["key"])]
    if expected is None:
        return "not in the reference"
    if expected == 0:
        return "as expected (none)" if measured == 0 else "none expected"
    off = measured / expected - 1
    return f"within 10 % ({off:+.0%})" if abs(off) <= SAME else f"**{off:+.0%}**"


def table(rows: list[dict[str, Any]], heartbeats: dict[Any, float], hollow: dict[Any, float]) -> list[str]:
    lines = []
    for row in rows:
        key, agent = tuple(row["key"]), row["agent"]
        measured = heartbeats[key] if key in HEARTBEATS else row["mean"]
        who = f"{agent} (kwok)" if key in HEARTBEATS else agent
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {who} | **{_num(measured)}** | "
                     f"{_num(row['due']) if key[0] == 'WATCH' else '—'} | {_num(hollow.get((agent, key)))} | "
                     f"{_num(row['real'])} | {verdict(row, measured)} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--pods-per-node", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "node_agents_fidelity.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="node-agents-fidelity-") as tmp:
        out = Path(tmp) / "run"
        plan = plan_file(Path(tmp), args.nodes, args.pods_per_node, args.window_s)
        subprocess.run([str(REPO / ".venv/bin/loadtest"), "run", "--plan", str(plan), "--out", str(out), "--no-gate"],
                       check=True, stdout=subprocess.DEVNULL)
        run = results.load(out)
        events = list(ha.read_events(sorted((out / "audit").glob("audit*.log"))))
        keep_raw(f"{RAW}/results.json.gz", (out / results.RESULTS_FILE).read_bytes())
    step = run.steps[0]
    nodes = [node_name(i) for i in range(args.nodes)]
    timeline = {"window_opened": epoch(step.window["opened_at"]), "window_closed": epoch(step.window["closed_at"]),
                "nodes_started": epoch(step.started_at)}
    measured = Measured(nodes, args.pods_per_node, timeline)
    requests = ha.requests_of(events)
    agents = [e for e in events if ha.is_agents(e) or (e.get("user") or {}).get("username") == KWOK_USER]
    keep_raw(f"{RAW}/agents-audit-events.jsonl.gz",
             "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in agents).encode())
    reference = yaml.safe_load(REFERENCE.read_text())
    rows = hollow_report.steady_rows(requests, measured, reference, CONFIGMAPS, SECRETS)
    heartbeats = kwok_heartbeats(requests, nodes, timeline["window_opened"], timeline["window_closed"])
    write(args, rows, heartbeats, requests, measured)
    return 0


def write(args: argparse.Namespace, rows: list[dict[str, Any]], heartbeats: dict[Any, float],
          requests: list[ha.Request], measured: Measured) -> None:
    minutes = (measured.timeline["window_closed"] - measured.timeline["window_opened"]) / 60
    lines = results_head(
        "Node agents against real ones: what each fake node's kubelet and kube-proxy send, per node per minute",
        f"{args.nodes} kwok nodes with {args.pods_per_node} pods each, the `node_agents` scenario alone, a "
        f"{minutes:.1f}-minute window, the apiserver's audit log; beside kubemark's hollow nodes' recorded run "
        "(benchmarks/results/hollow_node.md: 3 nodes, 3 pods each, 5 minutes) and the reference's long-run rates "
        f"(`loadtests/data/node_agents_reference.yaml`, real kubelet and kube-proxy, C = {CONFIGMAPS}, "
        f"S = {SECRETS}).",
        f".venv/bin/python benchmarks/node_agents_fidelity.py --nodes {args.nodes} --pods-per-node "
        f"{args.pods_per_node} --window-s {args.window_s:g}",
        ["verb", "resource", "subresource", "scope", "agent", "harness, per node", "renewals due in this window",
         "hollow nodes, per node", "reference: real node", "harness against the expected"])
    lines += table(rows, heartbeats, hollow_rates())
    lines += ["", "A WATCH row counts watch requests opened in the window; a watch renews at the `timeoutSeconds` it "
                  "asked, so its expected count in a few minutes is the renewals its own watches made due in the "
                  "window (hollow_audit.renewals_due), not the long-run rate. The proxies share one identity: "
                  "their rows are every proxy's requests over the nodes. `(kwok)`: the node's heartbeats, sent by "
                  "kwok for every node. No watch asks past the run's end: a timeout drawn beyond it is cut to the "
                  "time left, so the timeouts below can be shorter than the reference's range.",
              "", "## Watches held at the window's end", "", *hollow_report.watch_lines(requests, measured), "",
              *hollow_report.opening_lines(requests), "", "## Refused requests", "",
              *hollow_report.refused_lines(requests, measured), "", "## Who they are", "",
              *hollow_report.identity_lines(requests), "",
              f"Raw: the run's results.json and the agents' and kwok's audit events in benchmarks/results/raw/{RAW}/."]
    write_results(args.out, lines, also=f", raw in benchmarks/results/raw/{RAW}/")


if __name__ == "__main__":
    sys.exit(main())
