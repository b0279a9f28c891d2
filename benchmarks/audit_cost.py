"""What the apiserver's audit log costs: the same step run with auditing off and on, alternating, side by side.

Each run is `loadtest run` of one step (the default plan's load at N nodes) on a fresh control plane; the
pairs alternate their order (off-on, on-off, off-on ...), so a steady drift of the machine falls on both sides.
Per run: kube-apiserver CPU (psutil, over the measured window) per 1,000 requests it served, the requests
audited, the log's size.

The cost is read from the pairs: each pair's on − off difference, so a drift of the machine across the benchmark
(which can exceed the effect: compare the "off" runs with each other) cancels within a pair. The pairs'
differences are tested against zero with the exact Wilcoxon signed-rank test (6 pairs are the fewest that can
reach p < 0.05 two-sided). Each run's results.json is kept gzip-compressed in benchmarks/results/raw/audit_cost/.

    .venv/bin/python benchmarks/audit_cost.py [--nodes 500] [--pairs 6] [--duration-s 60] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.pairs import second_first, test_line  # noqa: E402
from benchmarks.plan_runs import default_load_plan  # noqa: E402
from loadtests import results  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RAW = "audit_cost"  # under benchmarks/results/raw/


def run_once(folder: Path, nodes: int, duration_s: float, audit: bool, index: int) -> dict[str, float]:
    out = folder / f"run-{index}-{'on' if audit else 'off'}"
    plan = default_load_plan(folder, f"audit-{'on' if audit else 'off'}", nodes, duration_s,
                             target={"kind": "local", "heartbeat_factor": 1}, audit={"enabled": audit})
    subprocess.run([str(REPO / ".venv/bin/loadtest"), "run", "--plan", str(plan), "--out", str(out), "--no-gate"],
                   check=True, stdout=subprocess.DEVNULL)
    keep_raw(f"{RAW}/{out.name}.results.json.gz", (out / results.RESULTS_FILE).read_bytes())
    step = results.load(out).steps[0]
    apiserver = next(p for p in step.processes if p.component == "kube-apiserver")
    machine = step.machine_cpu_percent
    served = sum(step.requests_by_code.values())
    log_bytes = sum(f.stat().st_size for f in (out / "audit").glob("audit*.log")) if audit else 0
    return {"audit": audit, "cpu_percent": apiserver.cpu_percent, "cpu_s": apiserver.cpu_seconds,
            "served": served, "cpu_ms_per_1000": 1000 * 1000 * apiserver.cpu_seconds / max(1, served),
            "audited": step.audit.events, "log_bytes": log_bytes, "machine": machine or 0.0,
            "window_s": step.duration_s}


def pair_lines(rows: list[dict[str, float]]) -> list[str]:
    """The cost as the pairs measure it, set against the drift of the "off" runs across the benchmark."""
    pairs = [(a, b) if not a["audit"] else (b, a) for a, b in zip(rows[0::2], rows[1::2], strict=True)]
    points = [on["cpu_percent"] - off["cpu_percent"] for off, on in pairs]
    share = [100 * (on["cpu_percent"] / off["cpu_percent"] - 1) for off, on in pairs]
    per_request = [100 * (on["cpu_ms_per_1000"] / off["cpu_ms_per_1000"] - 1) for off, on in pairs]
    offs = [off["cpu_percent"] for off, _ in pairs]
    lines = ["", f"Per pair (on − off, each pair side by side): {', '.join(f'{p:+.1f}' for p in points)} points of a "
                 f"core; {min(share):+.1f} % to {max(share):+.1f} % of kube-apiserver's CPU (median "
                 f"{statistics.median(share):+.1f} %), {min(per_request):+.1f} % to {max(per_request):+.1f} % per "
                 "request served.",
             f"Drift of the machine: the \"off\" runs ranged {min(offs):.1f}-{max(offs):.1f} % of a core "
             f"({max(offs) - min(offs):.1f} points) across the benchmark, against a median pair difference of "
             f"{statistics.median(points):+.1f} points."]
    return [*lines, test_line(points, "Pair differences of kube-apiserver CPU (on − off)", "points of a core",
                              "auditing costs CPU")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "audit_cost.md")
    args = parser.parse_args()
    rows = []
    for old in (RAW_DIR / RAW).glob("*.results.json.gz"):  # an earlier measurement's runs
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="audit-cost-") as tmp:
        for index in range(2 * args.pairs):
            audit = second_first(index)  # off-on, then on-off: a steady drift cancels
            row = run_once(Path(tmp), args.nodes, args.duration_s, audit, index)
            rows.append(row)
            print(f"run {index + 1}: audit {'on ' if audit else 'off'}: kube-apiserver {row['cpu_percent']:.1f} % "
                  f"of a core, {row['served']:,} requests, {row['audited']:,} audited", flush=True)
    lines = results_head(
        f"Audit log cost: kube-apiserver CPU with auditing off and on, {args.nodes:,} nodes",
        f"the default plan's load, one {args.duration_s:.0f} s step per run, pairs alternating off-on and on-off.",
        f".venv/bin/python benchmarks/audit_cost.py --nodes {args.nodes} --pairs {args.pairs} "
        f"--duration-s {args.duration_s:g}",
        ["run", "audit", "kube-apiserver CPU", "requests served", "CPU per 1,000 requests", "requests audited",
         "audit log of the run", "machine CPU"])
    for index, row in enumerate(rows, 1):
        lines.append(f"| {index} | {'on' if row['audit'] else 'off'} | {row['cpu_percent']:.1f} % | "
                     f"{row['served']:,.0f} | {row['cpu_ms_per_1000']:.0f} ms | {row['audited']:,.0f} | "
                     f"{row['log_bytes'] / 2**20:.1f} MiB | {row['machine']:.0f} % |")
    on = [r for r in rows if r["audit"]]
    off = [r for r in rows if not r["audit"]]

    def median(side: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in side)

    cpu_ratio = median(on, "cpu_percent") / median(off, "cpu_percent")
    per_request = median(on, "cpu_ms_per_1000") / median(off, "cpu_ms_per_1000")
    lines += ["", f"Median kube-apiserver CPU with auditing on / off: {cpu_ratio:.2f}× "
                  f"({median(on, 'cpu_percent'):.1f} % vs {median(off, 'cpu_percent'):.1f} % of a core); "
                  f"per request served: {per_request:.2f}×. The audit log of a whole run (ramp, settling and "
                  f"window) was {median(on, 'log_bytes') / 2**20:.1f} MiB.",
              *pair_lines(rows),
              "CPU: psutil over the measured window, 100 % = one core; requests served: apiserver_request_total "
              "delta over the window.",
              "", "Raw results (each run's results.json): benchmarks/results/raw/audit_cost/."]
    write_results(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
