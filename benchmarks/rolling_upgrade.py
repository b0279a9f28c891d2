"""A rolling upgrade under load on this machine: `loadtest rehearse --rolling` of a 500-node, loaded, highly
available control plane (3 etcd members, 2 apiservers behind HAProxy) from the previous Kubernetes version to
this one, with 100 informers watching every pod and a kubelet watch per node, twice: the informers resuming a
cut watch at once (as client-go does), and spread over `--spread` seconds (`informers.reconnect_spread_s`).

    .venv/bin/python benchmarks/rolling_upgrade.py                  # both variants, one after the other (16 min)
    .venv/bin/python benchmarks/rolling_upgrade.py --from-raw       # rebuild the table, run nothing

Written: benchmarks/results/rolling_upgrade.md and benchmarks/results/raw/rolling_upgrade/ (each variant's
results.json, its wall time and exit code, gzip-compressed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.plan_runs import PlanRun, cpu, gib, keep_runs, machine, read_raw, rss, run_loadtest  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.analysis.roll import figures, verdicts  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.report.roll import RELIST_MARK, REWATCH_MARK  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
NAME = "rolling_upgrade"
VARIANTS = ("at once", "spread")


def plan_text(nodes: int, informers: int, spread_s: float, duration_s: float) -> str:
    return yaml.safe_dump({
        "name": f"rolling-{nodes}",
        "target": {"topology": {"etcd_members": 3, "apiservers": 2}},
        "steps": [{"nodes": nodes, "pods_per_node": 2, "warmup_s": 20, "duration_s": duration_s,
                   "ramp_timeout_s": 600, "name": "roll"}],
        "load": {"scenarios": {
            "pod_churn": {"rate": 5, "lifetime_s": 10, "users": 2},
            "kubelet_watchers": {"per_node": 1},
            "informers": {"count": informers, "resource": "pods", "reconnect_spread_s": spread_s},
        }},
        "roll": {"steady_s": 30, "pause_s": 15, "probe_qps": 10, "recovery_s": 60},
    }, sort_keys=False)


def run_variant(plan: Path, out: Path) -> PlanRun:
    return run_loadtest(["rehearse", "--rolling", "--plan", str(plan), "--from", versions.PREVIOUS_KUBE_VERSION,
                         "--to", versions.DEFAULT_KUBE_VERSION, "--no-gate", "--force"], out)


def count(step: results.StepResult, mark: str, who: str) -> str:
    """Requests of one kind of watcher (`who`: "informer", "node") whose name ends with `mark`."""
    found = [c for c in step.client if c.name.endswith(mark) and f"({who}" in c.name]
    return f"{sum(c.count for c in found):,}" if found else "0"


def row(variant: str, run: PlanRun) -> str:
    (step,) = run.results.steps or [None]
    if step is None or step.roll is None:
        return f"| {variant} | the run did not finish: {run.results.error or run.results.status} |" + " |" * 10
    found = figures(step.roll)
    checks = {v.check: v for v in verdicts(step)}
    failed = ", ".join(f"{code} {n}" for code, n in sorted(found.failed.items())) or "none"
    marks = "; ".join(f"{m.instance.replace('kube-', '')} {m.stop_to_ready_s:.1f} s" for m in step.roll.marks)
    recovery = checks["recovery"].value
    slowest = (f"{found.steady_slowest_s * 1000:,.0f} / {found.roll_slowest_s * 1000:,.0f} ms"
               if found.steady_slowest_s is not None and found.roll_slowest_s is not None else "not measured")
    health = step.health.summary
    return (f"| {variant} | {found.seconds_served_pct:g} % of {found.roll_seconds} s ({found.requests_served_pct:g} % "
            f"of {found.sent:,}) | {failed} | {count(step, RELIST_MARK, 'informer')} | "
            f"{count(step, REWATCH_MARK, 'informer')} | {count(step, REWATCH_MARK, 'node')} | {slowest} | {recovery} | "
            f"{gib(rss(step, 'kube-apiserver'))} / {gib(rss(step, 'kube-apiserver-2'))} | "
            f"{marks} | {health.nodes_not_ready_max if health.nodes_not_ready_max is not None else 'not measured'}"
            f" | {machine(step)} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--informers", type=int, default=100)
    parser.add_argument("--spread", type=float, default=10.0, help="the spread variant's reconnect_spread_s")
    parser.add_argument("--duration", type=float, default=360.0, help="the roll step's window, seconds")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept raw results")
    args = parser.parse_args()
    raw = RAW_DIR / NAME
    if not args.from_raw:
        runs: list[PlanRun] = []
        with tempfile.TemporaryDirectory(prefix="rolling-") as tmp:
            for variant, spread in zip(VARIANTS, (0.0, args.spread), strict=True):
                plan = Path(tmp) / f"rolling-{variant.replace(' ', '-')}.yaml"
                plan.write_text(plan_text(args.nodes, args.informers, spread, args.duration))
                runs.append(run_variant(plan, Path(tmp) / f"run-{len(runs) + 1}"))
                keep_runs(runs, raw)  # each variant on disk before the next starts
        keep_raw(f"{NAME}/command.json.gz", {"command": ".venv/bin/python benchmarks/rolling_upgrade.py "
                                             f"--nodes {args.nodes} --informers {args.informers} --spread "
                                             f"{args.spread:g} --duration {args.duration:g}"})
    runs = read_raw(raw)
    command = json.loads(gzip.decompress((raw / "command.json.gz").read_bytes()))["command"]
    first = runs[0].results
    plan = first.plan
    spread = [r.results.plan["load"]["informers"].get("reconnect_spread_s", 0) for r in runs]
    lines = results_head(
        f"A rolling upgrade under load: {first.steps[0].nodes if first.steps else '?'} nodes, "
        f"{plan['load']['informers']['count']} informers",
        f"`loadtest rehearse --rolling` from {versions.PREVIOUS_KUBE_VERSION} to {versions.DEFAULT_KUBE_VERSION}: 3 "
        "etcd members and 2 apiservers behind HAProxy, each apiserver replaced (out of rotation, SIGTERM, started "
        "on the new version, ready, back in), then the controller-manager and the scheduler, 15 s apart, after 30 s "
        "of steady seconds; the load: pod churn 5/s, a kubelet watch per node, informers on every pod resuming a "
        f"cut watch at once and spread over {spread[-1]:g} s. Availability and recovery are the probe's (10 reads a "
        "second through HAProxy), not the load's; relists and watches again are the load's over the whole step (its "
        "steady seconds too). One run of each variant: a difference between them is not noise-checked.",
        command, ["informers reconnect", "availability (seconds fully served; probe requests)", "probe failures",
                  "informer relists", "informer watches again", "kubelet watches again",
                  "slowest probe (steady / roll)", "recovery",
                  "apiserver RSS max (1 / 2)", "stop to ready", "nodes NotReady (max)", "machine CPU (avg / max)"])
    for variant, run in zip(VARIANTS, runs, strict=False):
        lines.append(row(variant, run))
    lines += ["", "CPU over the roll step's window, % of one core (kube-apiserver: both instances' processes, old "
              "and new):", "", "| informers reconnect | kube-apiserver | kube-apiserver-2 | etcd | haproxy | loadgen "
              "| harness |", "|---" * 7 + "|"]
    for variant, run in zip(VARIANTS, runs, strict=False):
        if run.results.steps:
            step = run.results.steps[0]
            lines.append(f"| {variant} | " + " | ".join(cpu(step, c) for c in (
                "kube-apiserver", "kube-apiserver-2", "etcd", "haproxy", "loadgen", "harness")) + " |")
    lines.append("")
    for variant, run in zip(VARIANTS, runs, strict=False):
        minutes, seconds = divmod(round(run.wall_s), 60)
        said = {True: "held", False: "failed", None: "not measured"}
        verdict_line = "; ".join(f"{v.check} {said[v.passed]}" for step in run.results.steps for v in verdicts(step))
        lines.append(f"- {variant}: {minutes} min {seconds:02d} s end to end, {run.results.status}, exit "
                     f"{run.exit_code}; {verdict_line}" + (f" ({run.results.error})" if run.results.error else ""))
    lines += ["", f"Raw results (each variant's results.json, its wall time and exit code): "
              f"benchmarks/results/raw/{NAME}/."]
    write_results(RESULTS_DIR / f"{NAME}.md", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
