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
import math
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
from benchmarks.recorded import raw_run_folder  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.config.node_agents import REFERENCE, agent_watches  # noqa: E402
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


def irwin_hall_cdf(x: float, k: int) -> float:
    """P(U1 + ... + Uk <= x) for k uniforms on [0, 1] (the Irwin-Hall distribution)."""
    if x <= 0:
        return 0.0
    if x >= k:
        return 1.0
    return sum((-1) ** j * math.comb(k, j) * (x - j) ** k for j in range(math.floor(x) + 1)) / math.factorial(k)


def renewals(low: float, high: float, t: float) -> tuple[float, float]:
    """Mean and variance of how often a watch opened at 0 is opened again within t s, when each of its watches lasts
    a timeout drawn uniformly from [low, high] (client-go's reflector): P(N >= k) = P(S_k <= t), S_k the sum of k
    such timeouts."""
    at_least = []
    k = 1
    while k * low <= t:
        at_least.append(irwin_hall_cdf((t - k * low) / (high - low), k))
        k += 1
    mean = sum(at_least)
    return mean, sum((2 * k - 1) * p for k, p in enumerate(at_least, 1)) - mean ** 2


@dataclass(frozen=True)
class Expected:
    """A row's expected rate per node per minute in this window, and its 95 % band over this many nodes."""

    rate: float
    low: float
    high: float


def expected_watches(agent: str, key: tuple[str, ...], nodes: int, window_s: float) -> Expected | None:
    """What a row of watch requests should count in a window that opens as the agents start: each of the agent's
    watches of that resource renews at its own timeouts (the reference's range), so over the first minutes the rate
    is below the long-run one; the band is the spread of that many nodes' renewals."""
    watches = [w for w in agent_watches(agent) if w.resource == key[1] and not w.per_object]
    if not watches:
        return None
    mean = var = 0.0
    for watch in watches:
        m, v = renewals(*watch.timeout_s, window_s)
        mean, var = mean + m, var + v
    minutes, spread = window_s / 60, 1.96 * math.sqrt(var / nodes)
    return Expected(mean / minutes, max(0.0, mean - spread) / minutes, (mean + spread) / minutes)


def verdict(row: dict[str, Any], measured: float, expected: Expected | None) -> str:
    """Whether the harness's rate is the expected one: a watch row within its 95 % band (its renewals as the
    reference's timeouts make them, from the agents' start), any other within 10 % of the reference's rate."""
    if tuple(row["key"]) in NAMED and measured == 0:
        return NAMED[tuple(row["key"])]
    if expected is not None:
        if expected.rate == 0:
            return "as expected (none)" if measured == 0 else "none expected"
        inside = expected.low <= measured <= expected.high
        return f"within its 95 % band ({measured / expected.rate - 1:+.0%})" if inside else \
            f"**outside its 95 % band ({measured / expected.rate - 1:+.0%})**"
    if row["real"] is None:
        return "not in the reference"
    off = measured / row["real"] - 1
    return f"within 10 % ({off:+.0%})" if abs(off) <= SAME else f"**{off:+.0%}**"


def table(rows: list[dict[str, Any]], heartbeats: dict[Any, float], hollow: dict[Any, float], nodes: int,
          window_s: float) -> list[str]:
    lines = []
    for row in rows:
        key, agent = tuple(row["key"]), row["agent"]
        measured = heartbeats[key] if key in HEARTBEATS else row["mean"]
        who = f"{agent} (kwok)" if key in HEARTBEATS else agent
        expected = expected_watches(agent, key, nodes, window_s) if key[0] == "WATCH" else None
        if key[0] == "WATCH" and expected is None:
            expected = Expected(0.0, 0.0, 0.0)  # the per-object watches: none renews within an hour's timeout
        band = f"{_num(expected.rate)} ({_num(expected.low)}-{_num(expected.high)})" if expected else "—"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {who} | **{_num(measured)}** | {band} | "
                     f"{_num(hollow.get((agent, key)))} | {_num(row['real'])} | {verdict(row, measured, expected)} |")
    return lines


def pooled_line(rows: list[dict[str, Any]], nodes: int, window_s: float) -> str:
    """Every per-node watch of both agents together: their renewals per node per minute against the expected, with
    the band of that many watches (each row's few renewals are noisy on their own)."""
    found = [(row, expected_watches(row["agent"], tuple(row["key"]), nodes, window_s)) for row in rows
             if row["key"][0] == "WATCH"]
    found = [(row, e) for row, e in found if e is not None]
    measured = sum(row["mean"] for row, _ in found)
    expected = sum(e.rate for _, e in found)
    # each row's band is its mean ± 1.96 sd; rows are independent watches, so their variances add
    spread = math.sqrt(sum(((e.high - e.rate) / 1.96) ** 2 for _, e in found)) * 1.96
    return (f"All {len(found)} per-node watches of both agents together: {measured:.3f} renewals per node per minute "
            f"against {expected:.3f} expected ({measured / expected - 1:+.0%}; 95 % band {expected - spread:.3f}-"
            f"{expected + spread:.3f}).")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--pods-per-node", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "node_agents_fidelity.md")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept run, run nothing")
    args = parser.parse_args()
    run, events = kept_run() if args.from_raw else measure(args)
    step = run.steps[0]
    nodes = [node_name(i) for i in range(step.nodes)]
    timeline = {"window_opened": epoch(step.window["opened_at"]), "window_closed": epoch(step.window["closed_at"]),
                "nodes_started": epoch(step.started_at)}
    measured = Measured(nodes, step.pods_per_node, timeline)
    requests = ha.requests_of(events)
    reference = yaml.safe_load(REFERENCE.read_text())
    rows = hollow_report.steady_rows(requests, measured, reference, CONFIGMAPS, SECRETS)
    heartbeats = kwok_heartbeats(requests, nodes, timeline["window_opened"], timeline["window_closed"])
    write(args, rows, heartbeats, requests, measured)
    return 0


def measure(args: argparse.Namespace) -> tuple[Any, list[dict[str, Any]]]:
    """One run of the plan, its results and the audit events of the agents and of kwok (both kept raw)."""
    with tempfile.TemporaryDirectory(prefix="node-agents-fidelity-") as tmp:
        out = Path(tmp) / "run"
        plan = plan_file(Path(tmp), args.nodes, args.pods_per_node, args.window_s)
        subprocess.run([str(REPO / ".venv/bin/loadtest"), "run", "--plan", str(plan), "--out", str(out), "--no-gate"],
                       check=True, stdout=subprocess.DEVNULL)
        run = results.load(out)
        events = [e for e in ha.read_events(sorted((out / "audit").glob("audit*.log")))
                  if ha.is_agents(e) or (e.get("user") or {}).get("username") == KWOK_USER]
        keep_raw(f"{RAW}/results.json.gz", (out / results.RESULTS_FILE).read_bytes())
    keep_raw(f"{RAW}/agents-audit-events.jsonl.gz",
             "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events).encode())
    return run, events


def kept_run() -> tuple[Any, list[dict[str, Any]]]:
    with tempfile.TemporaryDirectory(prefix="node-agents-fidelity-") as tmp:
        run = results.load(raw_run_folder(RAW_DIR / RAW / "results.json.gz", Path(tmp) / "run"))
    lines = gzip.decompress((RAW_DIR / RAW / "agents-audit-events.jsonl.gz").read_bytes()).decode().splitlines()
    return run, [json.loads(line) for line in lines if line.strip()]


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
        ["verb", "resource", "subresource", "scope", "agent", "harness, per node", "expected here (95 % band)",
         "hollow nodes, per node", "reference: real node", "harness against the expected"])
    window_s = measured.timeline["window_closed"] - measured.timeline["window_opened"]
    lines += table(rows, heartbeats, hollow_rates(), len(measured.nodes), window_s)
    lines += ["", pooled_line(rows, len(measured.nodes), window_s)]
    lines += ["", "A WATCH row counts watch requests opened in the window. A watch renews at the `timeoutSeconds` it "
                  "asked, drawn from the reference's range, so a window that opens as the agents start holds fewer "
                  "renewals than the long-run rate: the expected column is that count (each timeout uniform in the "
                  "range; the k-th renewal falls inside when the sum of k timeouts does, an Irwin-Hall distribution), "
                  "its band the 95 % spread over this many nodes. Other rows are held to 10 % of the reference. "
                  "The proxies share one identity: "
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
