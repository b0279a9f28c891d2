"""What a bundled plan does on this machine: run it (or its capacity search) a few times on fresh control planes and
record, per run and step, the outcome, where the CPU went and how close the node Leases came to expiring.

The README's paragraphs on the default plan's report, the `large` plan and the capacity search quote the file
this writes; the raw results (each run's results.json, gzip-compressed) are kept beside it so anyone can rebuild
the table (`--from-raw`) and recheck a figure.

    .venv/bin/python benchmarks/plan_runs.py --plan default                       # one run, the sample report
    .venv/bin/python benchmarks/plan_runs.py --plan large --runs 2                # the large plan, twice
    .venv/bin/python benchmarks/plan_runs.py --plan capacity --capacity           # `loadtest capacity`
    .venv/bin/python benchmarks/plan_runs.py --plan large --from-raw              # rebuild the table, run nothing
    .venv/bin/python benchmarks/plan_runs.py --plan default --from-raw --screenshot docs/report-sample.png

Written: benchmarks/results/plan_<plan>[_capacity].md and benchmarks/results/raw/plan_<plan>[_capacity]/.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.analysis.slo import step_verdicts, thresholds  # noqa: E402
from loadtests.config import plan as plan_mod  # noqa: E402
from loadtests.report import page  # noqa: E402
from loadtests.results import RunResult, StepResult
from loadtests.results.apiserver import ServerLatency
from loadtests.run import capacity  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
COMPONENTS = ("kube-apiserver", "etcd", "kwok", "kube-controller-manager", "kube-scheduler")


@dataclass
class PlanRun:
    """One run of the plan: its results, how long the command took end to end, and its exit code."""

    results: RunResult
    wall_s: float
    exit_code: int


def default_load_plan(folder: Path, name: str, nodes: int, duration_s: float, **sections: Any) -> Path:
    """A one-step plan of the default plan's load at `nodes`, written into folder as NAME.yaml, with the plan
    sections a cost benchmark sets (`audit`, `profiles`, a `target` of its own): one plan, one setting toggled."""
    data = {"name": name, "target": {"kind": "local"},
            "steps": [{"nodes": nodes, "pods_per_node": 3, "warmup_s": 10, "duration_s": duration_s}],
            "load": {"scenarios": plan_mod.load("default").load}, **sections}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_once(plan: str, out: Path, search: bool, force: bool) -> PlanRun:
    """`loadtest run` (or `loadtest capacity`) of the plan into `out`; an SLO failing or a step saturating is a
    finding here, not an error (--no-gate; the exit code is recorded). A capacity search takes neither --no-gate
    nor --force: it always runs up to what the machine holds, and its exit code is no verdict."""
    gate = [] if search else ["--no-gate", *(["--force"] if force else [])]
    return run_loadtest(["capacity" if search else "run", "--plan", plan, *gate], out)


def run_loadtest(arguments: list[str], out: Path) -> PlanRun:
    """This venv's `loadtest ARGUMENTS --out OUT`, said as it starts, timed, and its results read back."""
    command = [str(Path(sys.executable).with_name("loadtest")), *arguments, "--out", str(out)]
    print("$ " + shlex.join(command), flush=True)
    started = time.monotonic()
    code = subprocess.run(command, check=False).returncode
    return PlanRun(results.load(out), time.monotonic() - started, code)


def keep_runs(runs: list[PlanRun], folder: Path) -> None:
    """Each run's results (with its wall time and exit code) gzip-compressed into `folder`, replacing an earlier
    measurement's."""
    for old in folder.glob("*.json.gz"):
        old.unlink()
    for index, run in enumerate(runs, 1):
        keep_raw(f"{folder.name}/run-{index}.json.gz", {"wall_s": run.wall_s, "exit_code": run.exit_code,
                                                        "results": results.to_dict(run.results)})


def read_raw(folder: Path) -> list[PlanRun]:
    runs = []
    for path in sorted(folder.glob("run-*.json.gz"), key=lambda p: int(p.name.split("-")[1].split(".")[0])):
        data = json.loads(gzip.decompress(path.read_bytes()))
        runs.append(PlanRun(results.from_dict(data["results"]), data["wall_s"], data["exit_code"]))
    if not runs:
        raise SystemExit(f"{folder}: no kept runs (run-N.json.gz); run the benchmark without --from-raw first")
    return runs


def screenshot(run: PlanRun, path: Path) -> None:
    """The top of the run's report, rebuilt from its results and drawn in headless Chromium (the README's
    sample report)."""
    from loadtests.report.html import write_report
    from tests.browser import Chromium

    with tempfile.TemporaryDirectory(prefix="plan-report-") as tmp:
        folder = Path(tmp) / run.results.run_id
        results.save(run.results, folder)
        html = write_report(folder)
        with Chromium() as browser:
            page = browser.new_page()
            page.navigate(html.as_uri(), timeout=90)
            page.wait_for("document.body.dataset.charts === 'drawn'", timeout=90)
            page.screenshot(path)
    print(f"written: {path}")


def cpu(step: StepResult, component: str) -> str:
    found = [p for p in step.processes if p.component == component]
    return f"{sum(p.cpu_percent for p in found):.0f} %" if found else "not measured"


def outcome(step: StepResult, run: RunResult) -> str:
    """"every SLO held (9 judged)", the checks that failed, or what did not converge."""
    limits = thresholds(run)
    failed = capacity.step_failures(step, limits)
    if failed:
        return ("**saturated**: " if step.status == "saturated" else "") + "; ".join(failed)
    judged = sum(v.passed is not None for v in step_verdicts(step, limits) if v.count > 0)
    return f"every SLO held ({judged} judged)"


def p99(found: ServerLatency | None) -> str:
    """The server-side p99 with its request count; a histogram bound says so."""
    if found is None or found.p99 is None:
        return "not measured"
    bound = {"<": "under ", ">": "over "}.get(found.bounds.get("p99", ""), "")
    return f"{bound}{page.in_unit(found.p99, 's')} ({found.count:,})"


def server(step: StepResult, verb: str, resource: str, scope: str) -> ServerLatency | None:
    return next((s for s in step.server if s.verb == verb and s.resource == resource and s.scope == scope
                 and not s.subresource), None)


def _or_not_measured(value: float | None) -> str:
    return "not measured" if value is None else f"{value:g}"


def machine(step: StepResult) -> str:
    summary = step.health.summary
    avg, top = summary.cpu_machine_avg, summary.cpu_machine_max
    if avg is None:
        return "not measured"
    return f"{avg:.0f} / {top:.0f} %" if top is not None else f"{avg:.0f} %"


def short_of_asked(step: StepResult) -> str:
    """The scenarios that achieved less than 90 % of what they were asked per second."""
    short = [f"{r.scenario} {r.achieved_per_s:.1f} of {r.asked_per_s:g}/s" for r in step.rates
             if r.per_second and r.asked_per_s and r.achieved_per_s < 0.9 * r.asked_per_s]
    return "; ".join(short) or "none"


def seconds(value: float | None) -> str:
    return f"{value:.1f} s" if value is not None else "not measured"


def ramp(step: StepResult) -> str:
    return f"{seconds(step.ramp.get('nodes_ready_s'))} / {seconds(step.ramp.get('pods_running_s'))}"


def expensive(step: StepResult, top: int = 2) -> str:
    """The clients with the most apiserver time in the window, from the audit log (where it was on)."""
    if not step.audit.requests:
        return "none recorded (audit off, or no window)"
    by_client: dict[str, list[float]] = {}
    for row in step.audit.requests:
        found = by_client.setdefault(row.client, [0, 0.0])
        found[0] += row.count
        found[1] += row.apiserver_s
    ranked = sorted(by_client.items(), key=lambda item: -item[1][1])[:top]
    return "; ".join(f"{client}: {count:,.0f} requests, {spent:,.0f} s" for client, (count, spent) in ranked)


def size(value: float | None) -> str:
    return page.in_unit(value, "bytes") if value else "not measured"


def gib(value: float | None) -> str:
    return f"{value / 2**30:.2f} GiB" if value else "not measured"


def rss(step: StepResult, component: str) -> float | None:
    found = [p.rss_max_bytes for p in step.processes if p.component == component]
    return float(sum(found)) if found else None


def lease(step: StepResult) -> str:
    lag, of = step.health.summary.lease_lag_max_s, step.health.summary.lease_duration_s
    if lag is None:
        return "not measured"
    return f"{lag:.1f} s" + (f" of {of:g} s" if of else "")


def tables(runs: list[PlanRun]) -> list[str]:
    """Two tables, a row per run and step: the outcome and where the CPU went; then the figures that grow."""
    lines = ["| run | nodes | outcome | machine CPU (avg / max of "
             f"{100 * (runs[0].results.environment.get('machine', {}).get('cpus') or 0):.0f} %) | "
             + " | ".join(COMPONENTS) + " | load generator | harness | oldest Lease | nodes NotReady (max) |",
             "|---" * (8 + len(COMPONENTS)) + "|"]
    for index, run in enumerate(runs, 1):
        for step in run.results.steps:
            lines.append(f"| {index} | {step.nodes:,} | {outcome(step, run.results)} | {machine(step)} | "
                         + " | ".join(cpu(step, c) for c in COMPONENTS)
                         + f" | {cpu(step, 'loadgen')} | {cpu(step, 'harness')} | "
                         f"{lease(step)} | {_or_not_measured(step.health.summary.nodes_not_ready_max)} |")
    lines += ["", "| run | nodes | nodes Ready / pods Running in | load started in | kube-apiserver RSS (max) | "
              "etcd db size | POST pods p99 (requests) | LIST pods, cluster p99 (requests) | pod startup p99 (pods) | "
              "scenarios short of asked | most apiserver time (audit log) |",
              "|---" * 11 + "|"]
    for index, run in enumerate(runs, 1):
        for step in run.results.steps:
            startup = step.pod_startup
            startup_text = (f"{page.in_unit(startup.p99, 's')} ({startup.count:,})" if startup.p99 is not None
                            else "not measured")
            lines.append(f"| {index} | {step.nodes:,} | {ramp(step)} | {seconds(step.ramp.get('load_spawn_s'))} | "
                         f"{gib(rss(step, 'kube-apiserver'))} | "
                         f"{size(step.etcd.db_size_bytes)} | "
                         f"{p99(server(step, 'POST', 'pods', 'resource'))} | "
                         f"{p99(server(step, 'LIST', 'pods', 'cluster'))} | {startup_text} | {short_of_asked(step)} | "
                         f"{expensive(step)} |")
    return lines


def run_lines(runs: list[PlanRun], search: bool) -> list[str]:
    """A line per run: how long it took, how it ended, and for a search its last line."""
    lines = [""]
    for index, run in enumerate(runs, 1):
        minutes, seconds = divmod(round(run.wall_s), 60)
        line = (f"Run {index} ({run.results.run_id}): {minutes} min {seconds:02d} s end to end, "
                f"{run.results.status}, exit {run.exit_code}")
        if run.results.error:
            line += f" ({run.results.error})"
        if search:
            line += f"; {capacity.summarize(run.results).line()}"
        lines.append(line + ".")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="default")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--capacity", action="store_true", help="run `loadtest capacity` instead of `loadtest run`")
    parser.add_argument("--force", action="store_true", help="pass --force (a plan beyond the sizing check)")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept raw results")
    parser.add_argument("--screenshot", type=Path, metavar="PNG", help="also draw the first run's report there")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: at least 1")
    name = f"plan_{args.plan}" + ("_capacity" if args.capacity else "")
    raw = RAW_DIR / name
    command = (f".venv/bin/python benchmarks/plan_runs.py --plan {args.plan} --runs {args.runs}"
               + (" --capacity" if args.capacity else "") + (" --force" if args.force else ""))
    if args.from_raw:
        runs = read_raw(raw)
        command = json.loads(gzip.decompress((raw / "command.json.gz").read_bytes()))["command"]
    else:
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
            runs = [run_once(args.plan, Path(tmp) / f"run-{i}", args.capacity, args.force)
                    for i in range(1, args.runs + 1)]
        keep_runs(runs, raw)
        keep_raw(f"{name}/command.json.gz", {"command": command})
    first = runs[0].results
    versions = first.environment.get("versions", {})
    what = "its capacity search" if args.capacity else "the plan"
    lines = results_head(
        f"The {args.plan} plan{' (capacity search)' if args.capacity else ''}: {len(runs)} run(s)",
        f"Kubernetes {versions.get('kubernetes', 'version not recorded')}; {what} run {len(runs)} time(s) on "
        "fresh control planes one after another. CPU in % of one core, mean over each measured window (over the "
        "ramp for a saturated step); the oldest Lease is the most overdue renewal of the step.",
        command, ["run", "nodes"])[:-2]
    lines += tables(runs) + run_lines(runs, args.capacity)
    lines += ["", "Raw results (each run's results.json, its wall time and exit code): "
              f"benchmarks/results/raw/{name}/."]
    out = RESULTS_DIR / f"{name}.md"
    write_results(out, lines)
    if args.screenshot:
        screenshot(runs[0], args.screenshot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
