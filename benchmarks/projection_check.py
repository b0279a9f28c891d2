"""Do the report's projections hold? Project the larger steps of a run from its smaller ones, then set the
projection beside what the larger steps measured.

The default plan's load (pods per node, warm-up, duration and scenarios as in loadtests/plans/default.yaml) is
run through `loadtest run` at 100, 250, 500, 1,000 and 2,000 nodes. The report's projection code then sees only
the 100/250/500 steps and projects every figure to 1,000 and 2,000 nodes; the table sets each projected value
and its 95 % band beside the measured one, with the error, and names the figures that miss by more than 30 %.

    .venv/bin/python benchmarks/projection_check.py [--force] [--out benchmarks/results/projection_check.md]
    .venv/bin/python benchmarks/projection_check.py --from-results reports/<run>   # compare only, run nothing
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import results_head  # noqa: E402
from loadtests.report import page  # noqa: E402
from loadtests.report.figures import series  # noqa: E402
from loadtests.report.projection import RunProjection, cpu_bound, cpu_note, project  # noqa: E402
from loadtests.results import RESULTS_FILE, RunResult, load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PLAN = ROOT / "loadtests" / "plans" / "default.yaml"
FIT_FROM = [100, 250, 500]
CHECK_AT = [1000, 2000]
MISS_SHARE = 0.30  # a projection further than this from the measurement is named under the table


def plan_for(sizes: list[int], duration_s: float) -> dict:
    """The default plan's target, load and SLOs at the given sizes, each step like the default plan's steps."""
    default = yaml.safe_load(DEFAULT_PLAN.read_text())
    step = default["steps"][0]
    return {
        "name": "projection-check",
        "target": default.get("target", {"kind": "local"}),
        "steps": [{"nodes": n, "pods_per_node": step.get("pods_per_node", 3), "warmup_s": step.get("warmup_s", 10),
                   "duration_s": duration_s} for n in sizes],
        "load": default["load"],
        "slo": default.get("slo", {}),
    }


def run_plan(plan: dict, out: Path, force: bool) -> None:
    """`loadtest run` of the plan into `out`; an SLO failing is a finding here, not an error (--no-gate)."""
    loadtest = Path(sys.executable).with_name("loadtest")
    with tempfile.TemporaryDirectory(prefix="projection-check-") as tmp:
        plan_file = Path(tmp) / "projection-check.yaml"
        plan_file.write_text(yaml.safe_dump(plan, sort_keys=False))
        command = [str(loadtest), "run", "--plan", str(plan_file), "--out", str(out), "--no-gate",
                   *(["--force"] if force else [])]
        print("$ " + shlex.join(command), flush=True)
        code = subprocess.run(command, check=False).returncode
    if not (out / RESULTS_FILE).exists():
        raise SystemExit(f"loadtest run exited with code {code} and wrote no {RESULTS_FILE} in {out}")
    if code != 0:
        print(f"loadtest run exited with code {code}; comparing the steps it recorded", flush=True)


def within_band(value: float, low: float, high: float) -> bool:
    slack = 1e-9 * max(abs(low), abs(high))  # a band of exact data has no width, only rounding
    return low - slack <= value <= high + slack


def compare(run: RunResult, fit_from: list[int], check_at: list[int]) -> tuple[RunProjection, list[dict]]:
    """Project from the `fit_from` steps only, then read the measured figures of the `check_at` steps."""
    measured = [s for s in run.steps if s.status == "measured"]
    fitted = dataclasses.replace(run, steps=[s for s in measured if s.nodes in fit_from])
    checked = {s.nodes: s.index for s in measured if s.nodes in check_at}
    found = project(fitted, to=sorted(checked))
    positions = {s.index: i for i, s in enumerate(run.steps)}
    actual = {(s.chart, s.name): s.values for s in series(run)}
    rows = []
    for p in found.projections:
        values = actual.get((p.chart.id, p.series.name))
        for target, projected, low, high in zip(p.targets, p.values, p.low, p.high, strict=True):
            value = values[positions[checked[target]]] if values else None
            error = (projected - value) / value if value else None
            rows.append({"projection": p, "nodes": target, "projected": projected, "low": low, "high": high,
                         "measured": value, "error": error,
                         "in_band": None if value is None else within_band(value, low, high)})
    return found, rows


def table(run: RunResult, found: RunProjection, rows: list[dict], fit_from: list[int]) -> list[str]:
    lines = []
    for row in rows:
        p = row["projection"]
        unit = p.chart.unit
        error = row["error"]
        miss = error is not None and abs(error) > MISS_SHARE
        in_band = {True: "yes", False: "no", None: "—"}[row["in_band"]]
        lines.append(
            f"| {p.label} | {p.fit.describe(unit)} (R² {p.fit.r2:.3f}) | {row['nodes']:,} | "
            f"{page.in_unit(row['projected'], unit)} | {page.in_unit(row['low'], unit)} – "
            f"{page.in_unit(row['high'], unit)} | {page.in_unit(row['measured'], unit)} | "
            f"{'—' if error is None else f'{round(error * 100) or 0:+d} %'}{' **miss**' if miss else ''} | "
            f"{in_band} | "
            f"{'(to explain)' if miss else ''} |")
    misses = sorted({r["projection"].label for r in rows if r["error"] is not None and abs(r["error"]) > MISS_SHARE})
    unmeasured = sorted({r["projection"].label for r in rows if r["measured"] is None})
    lines += ["", f"Projected from the {', '.join(f'{n:,}' for n in fit_from)}-node steps only; error = "
              "(projected − measured) / measured; band = the 95 % prediction interval of the fit.", ""]
    lines.append(f"Misses by more than {MISS_SHARE * 100:.0f} %: {', '.join(misses) if misses else 'none'}.")
    if unmeasured:
        lines.append(f"Not measured at a checked scale (no value to compare): {', '.join(unmeasured)}.")
    lines += ["", f"CPU over the fitted steps: {cpu_note(found)}"]
    checked = sorted({r["nodes"] for r in rows})
    busy = [s.nodes for s in run.steps if s.nodes in checked and cpu_bound(run, s)]
    if busy:
        lines.append(f"CPU-bound among the checked steps (machine CPU at or above 85 % of its cores): "
                     f"{', '.join(f'{n:,}' for n in busy)} nodes; their latency and CPU show this machine's limit, "
                     "which a fit over unsaturated steps cannot foresee.")
    if found.skipped or found.flat:
        lines += ["", "Not projected: " + "; ".join(
            part for part in (f"fewer than 3 values: {', '.join(found.skipped)}" if found.skipped else "",
                              f"the same at every fitted step: {', '.join(found.flat)}" if found.flat else "")
            if part) + "."]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-results", type=Path, metavar="DIR",
                        help="compare the steps of this run folder; run nothing")
    parser.add_argument("--fit-from", type=int, nargs="+", default=FIT_FROM, help="steps the projection sees")
    parser.add_argument("--check-at", type=int, nargs="+", default=CHECK_AT, help="steps it is checked against")
    parser.add_argument("--duration-s", type=float, default=60.0, help="measured window of each step")
    parser.add_argument("--run-dir", type=Path, help="where `loadtest run` writes (default: reports/...)")
    parser.add_argument("--force", action="store_true", help="pass --force to `loadtest run`")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "projection_check.md")
    args = parser.parse_args()
    sizes = sorted(set(args.fit_from) | set(args.check_at))
    if args.from_results:
        folder = args.from_results
        command = (f".venv/bin/python benchmarks/projection_check.py --from-results {folder} "
                   f"--fit-from {' '.join(map(str, args.fit_from))} --check-at {' '.join(map(str, args.check_at))}")
    else:
        folder = args.run_dir or ROOT / "reports" / f"projection-check-{time.strftime('%Y%m%d-%H%M%S')}"
        run_plan(plan_for(sizes, args.duration_s), folder, args.force)
        command = (f".venv/bin/python benchmarks/projection_check.py --fit-from "
                   f"{' '.join(map(str, args.fit_from))} --check-at {' '.join(map(str, args.check_at))} "
                   f"--duration-s {args.duration_s:g}{' --force' if args.force else ''}")
    run = load(folder)
    have = {s.nodes for s in run.steps if s.status == "measured"}
    if len(have & set(args.fit_from)) < 3 or not have & set(args.check_at):
        print(f"{folder}: measured steps {sorted(have)}; need at least 3 of {args.fit_from} to fit and one of "
              f"{args.check_at} to check", file=sys.stderr)
        return 2
    found, rows = compare(run, args.fit_from, args.check_at)
    machine = run.environment.get("machine", {}) if isinstance(run.environment, dict) else {}
    steps = run.steps[0] if run.steps else None
    setting = (f"run {run.run_id} ({folder}), recorded on {machine.get('cpus', '?')} cores; steps "
               f"{', '.join(f'{s.nodes:,}' for s in run.steps)} nodes"
               + (f" × {steps.pods_per_node} pods per node, {steps.duration_s:.0f} s each" if steps else "")
               + "; the default plan's load.")
    lines = results_head("Projection check: projected from small steps vs measured at larger ones", setting, command,
                         ["figure", "model (fitted steps)", "nodes", "projected", "95 % band", "measured", "error",
                          "in band", "why (misses)"])
    lines += table(run, found, rows, sorted(have & set(args.fit_from)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
