"""ClusterLoader2's load test on this machine: the bundled `cl2-load` plan's five phases (30 pods per node, its
defaults) at growing scales, one fresh control plane per scale, until a scale does not hold; then the breaking
point as the capacity search reports it (the largest scale where every phase held, the first that did not,
which phase and what failed, with its evidence).

A phase held when it was not saturated, no SLO failed, the scheduler's best interval reached its threshold and
every controlling object was done before the phase's window closed (run/capacity.step_failures). Each scale is
one `loadtest run --force` (the sizing check is for plans a user runs; this one looks for where the machine
stops) of the plan with its steps set to that scale, each phase given time for its pods at the plan's
throughput and then some.

    .venv/bin/python benchmarks/cl2_load.py --scales 100 200 400     # a scale after another, until one breaks
    .venv/bin/python benchmarks/cl2_load.py --scales 150 --resume     # one more scale beside those kept, e.g.
                                                                      # between the last that held and the first
                                                                      # that did not (remove a scale's run-N.json.gz
                                                                      # to redo it)
    .venv/bin/python benchmarks/cl2_load.py --from-raw                # rebuild the table, run nothing

Written: benchmarks/results/cl2_load.md and benchmarks/results/raw/cl2_load/ (each scale's results.json, its
wall time and exit code, gzip-compressed).
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
from benchmarks.plan_runs import (  # noqa: E402
    COMPONENTS,
    PlanRun,
    cpu,
    gib,
    keep_runs,
    machine,
    read_raw,
    rss,
    run_once,
    size,
)
from loadtests.analysis.slo import thresholds  # noqa: E402
from loadtests.config import cl2  # noqa: E402
from loadtests.config.plan import PLANS_DIR  # noqa: E402
from loadtests.measure.component_metrics import CONTROLLER_QUEUES  # noqa: E402
from loadtests.report import page  # noqa: E402
from loadtests.results import StepResult  # noqa: E402
from loadtests.run.capacity import step_failures  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
NAME = "cl2_load"
SLACK_S = 180.0  # beyond a phase's own pace, before its window is cut short (and the phase does not hold)


def scale_plan(nodes: int, folder: Path) -> Path:
    """The bundled cl2-load plan with its five phases at `nodes`, each allowed its pods' time at the plan's
    throughput twice over plus SLACK_S."""
    plan = yaml.safe_load((PLANS_DIR / "cl2-load.yaml").read_text())
    params = plan["cl2"]
    mix = cl2.load_mix(nodes, params["pods_per_node"], params["nodes_per_namespace"])
    pods_s = mix.controlled_pods() / float(params["throughput"])
    latency_s = float(params["latency_pods"]) / float(params.get("latency_qps") or cl2.LATENCY_QPS)
    limits = {cl2.CREATE: 2 * pods_s, cl2.SCALE: pods_s, cl2.DELETE: 2 * pods_s, cl2.SCHEDULER: 120.0,
              cl2.POD_STARTUP: 2 * latency_s}
    plan["name"] = f"cl2-load-{nodes}"
    plan["steps"] = [{"nodes": nodes, "phase": phase, "warmup_s": 0, "duration_s": round(limits[phase] + SLACK_S)}
                     for phase in cl2.PHASES]
    path = folder / f"cl2-load-{nodes}.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def phase_of(step: StepResult) -> str:
    return step.name.split(" · ", 1)[1] if " · " in step.name else step.name


def rate(step: StepResult) -> str:
    found = [r for r in step.rates if r.scenario == phase_of(step)]
    if not found:
        return "not measured"
    r = found[0]
    unit = f"{r.unit}/s" if r.per_second else r.unit
    return f"{r.asked_per_s:g} → {r.achieved_per_s:.1f} {unit}"


def controlled(step: StepResult) -> str:
    """The slowest kind's p99 from asked to every pod running (nearest rank: of few objects, their maximum)."""
    timed = [(c.running.p99, kind, c.running.count) for kind, c in step.controlled.items()
             if c.running.p99 is not None]
    if not timed:
        return "—"
    p99, kind, count = max(timed)
    return f"{kind} {page.in_unit(p99, 's')} ({'max of ' if count < 100 else ''}{count:,})"


def scheduling(step: StepResult) -> str:
    s = step.scheduling
    if s is None:
        return "—"
    verdict = {True: "held", False: "below", None: "not judged"}[s.passed]
    best = f"{s.max:.0f}" if s.max is not None else "—"
    median = f"{s.p50:.0f}" if s.p50 is not None else "—"
    return f"best {best}, median {median} pods/s of {s.pods:,} ({verdict} {s.threshold:g})"


def startup(step: StepResult) -> str:
    found = step.pod_startup
    if phase_of(step) != cl2.POD_STARTUP or found.p99 is None:
        return "—"
    return f"{page.in_unit(found.p99, 's')} ({found.count:,} pods)"


def other(step: StepResult) -> str:
    if step.machine_cpu_percent is None:
        return "not measured"
    return f"{max(0.0, step.machine_cpu_percent - sum(p.cpu_percent for p in step.processes)):.0f} %"


def outcome(step: StepResult, limits: dict) -> str:
    failed = step_failures(step, limits)
    return "**did not hold**: " + "; ".join(failed) if failed else "held"


def queues(step: StepResult) -> str:
    """Items added and wait p99 of the six controllers' work queues over the phase."""
    found = step.health.summary.workqueues
    cells = []
    for name in CONTROLLER_QUEUES:
        q = found.get(name)
        if q is None or q.adds is None:
            cells.append("not measured")
            continue
        wait = page.bounded(q.wait_p99_s, q.bounds.get("wait_p99_s", ""))
        cells.append(f"{q.adds:,.0f} · {wait}")
    return " | ".join(cells)


def tables(runs: list[PlanRun]) -> list[str]:
    cpus = runs[0].results.environment.get("machine", {}).get("cpus") or 0
    lines = ["| nodes | phase | outcome | window | rate asked → achieved | controlled pods running p99 (slowest kind) "
             "| scheduling throughput | pod startup p99 | kube-apiserver RSS (max) | etcd db size |",
             "|---" * 10 + "|"]
    for run in runs:
        limits = thresholds(run.results)
        for step in run.results.steps:
            lines.append(f"| {step.nodes:,} | {phase_of(step)} | {outcome(step, limits)} | "
                         f"{page.in_unit(step.duration_s, 's')} | {rate(step)} | {controlled(step)} | "
                         f"{scheduling(step)} | {startup(step)} | {gib(rss(step, 'kube-apiserver'))} | "
                         f"{size(step.etcd.db_size_bytes)} |")
    lines += ["", f"CPU, % of one core over each phase's window (this machine: {100 * cpus:.0f} %; other processes: "
              "the machine's CPU that no component, the load generator or the harness used, i.e. what else ran on "
              "the machine meanwhile):", "",
              f"| nodes | phase | machine (avg / max) | {' | '.join(COMPONENTS)} | harness | other processes |",
              "|---" * (5 + len(COMPONENTS)) + "|"]
    for run in runs:
        for step in run.results.steps:
            lines.append(f"| {step.nodes:,} | {phase_of(step)} | {machine(step)} | "
                         + " | ".join(cpu(step, c) for c in COMPONENTS) + f" | {cpu(step, 'harness')} | "
                         f"{other(step)} |")
    lines += ["", "The controller-manager's work queues over each phase: items added · wait p99 (its /metrics):", "",
              f"| nodes | phase | {' | '.join(CONTROLLER_QUEUES)} |", "|---" * (2 + len(CONTROLLER_QUEUES)) + "|"]
    for run in runs:
        for step in run.results.steps:
            lines.append(f"| {step.nodes:,} | {phase_of(step)} | {queues(step)} |")
    return lines


def scale(run: PlanRun) -> int:
    return run.results.steps[0].nodes if run.results.steps else 0


def held(run: PlanRun) -> bool:
    """Every phase of the scale held, and the run finished."""
    limits = thresholds(run.results)
    return run.results.status == "complete" and not any(step_failures(s, limits) for s in run.results.steps)


def breaking_point(runs: list[PlanRun]) -> str:
    """The capacity search's sentence, over whole scales: a scale held when every phase of it did."""
    held, broke = [], None
    for run in runs:
        limits = thresholds(run.results)
        failing = [(step, step_failures(step, limits)) for step in run.results.steps]
        failing = [(step, failed) for step, failed in failing if failed]
        nodes = run.results.steps[0].nodes if run.results.steps else None
        if run.results.status != "complete" and not failing:
            broke = (nodes, f"the run did not finish ({run.results.error or run.results.status})")
            break
        if failing:
            step, failed = failing[0]
            broke = (nodes, f"{phase_of(step)} did not hold: {'; '.join(failed)}")
            break
        held.append(nodes)
    largest = f"{max(held):,} nodes" if held else "none of the scales tried"
    line = f"Largest scale where every phase held: {largest}"
    if broke:
        line += f"; at {broke[0]:,} nodes {broke[1]}"
    else:
        line += " (the largest tried; the breaking point is beyond it)"
    return line + "."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[100, 200, 400], metavar="NODES")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept raw results")
    parser.add_argument("--resume", action="store_true",
                        help="keep the scales already measured (raw results kept) and run only the others")
    args = parser.parse_args()
    raw = RAW_DIR / NAME
    if not args.from_raw:
        runs = sorted(read_raw(raw), key=scale) if args.resume else []
        measured = {scale(r) for r in runs}
        broke = min((scale(r) for r in runs if not held(r)), default=None)
        # past a break nothing more; below it, a scale between the last that held and the first that did not
        left = sorted(n for n in set(args.scales) - measured if broke is None or n < broke)
        with tempfile.TemporaryDirectory(prefix="cl2-load-") as tmp:
            for nodes in left:
                plan = scale_plan(nodes, Path(tmp))
                run = run_once(str(plan), Path(tmp) / f"run-{nodes}", search=False, force=True)
                runs = sorted([*runs, run], key=scale)
                keep_runs(runs, raw)  # each scale on disk before the next starts, with the command that ran it
                ran = " ".join(str(scale(r)) for r in runs)
                keep_raw(f"{NAME}/command.json.gz",
                         {"command": f".venv/bin/python benchmarks/cl2_load.py --scales {ran or nodes}"})
                if not held(run):
                    break  # the scales above it are past the break
    runs = sorted(read_raw(raw), key=scale)  # what was kept, by this call or an earlier one (a search cut short too)
    command = json.loads(gzip.decompress((raw / "command.json.gz").read_bytes()))["command"]
    versions = runs[0].results.environment.get("versions", {})
    lines = results_head(
        f"ClusterLoader2's load test (cl2-load): {len(runs)} scale(s)",
        f"Kubernetes {versions.get('kubernetes', 'version not recorded')}; the bundled cl2-load plan (30 pods per "
        "node, one namespace per 100 nodes, 10 pods/s, max(1000, nodes) scheduler pods, 500 latency pods) at each "
        "scale on a fresh control plane, scales one after another until one does not hold. Server latencies are "
        "judged as in every run (SIG Scalability's thresholds); the scheduler's best 5 s interval against 100 "
        "pods/s; a quantile of fewer than 100 objects or pods is their maximum.",
        command, ["nodes", "phase"])[:-2]
    lines += tables(runs)
    lines += ["", breaking_point(runs)]
    for run in runs:
        minutes, seconds = divmod(round(run.wall_s), 60)
        lines.append(f"- {run.results.steps[0].nodes if run.results.steps else '?'} nodes: {minutes} min "
                     f"{seconds:02d} s end to end, {run.results.status}, exit {run.exit_code}"
                     + (f" ({run.results.error})" if run.results.error else ""))
    lines += ["", f"Raw results (each scale's results.json, its wall time and exit code): "
              f"benchmarks/results/raw/{NAME}/."]
    out = RESULTS_DIR / f"{NAME}.md"
    write_results(out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
