"""How far does each figure move between runs of one build? Run a plan N times on fresh control planes and record
every compared figure's run-to-run spread, the noise floor a single-run comparison weighs its changes against.

`loadtest run --plan PLAN --repeat N --no-gate --out DIR` makes the runs (default: the smoke plan, 5 runs); or
`--from-results DIR...` reads runs already made (each a run folder or the folder of a repeated run). Written:

- benchmarks/results/noise_floor_<plan>.md: per figure and step, the median and min–max of the runs and their
  spread (max / min - 1, the most one run was above another), with the command and the machine;
- loadtests/data/noise_floor.json: the plan's floor (per figure (chart, name) its largest spread over the steps,
  with its run count, plan and date) beside the other plans' floors, which it leaves as they were: `loadtest
  compare` reads it (see loadtests/analysis/noise.py);
- benchmarks/results/raw/noise_floor/<plan>/<run id>.results.json.gz: each run's results, as they were read.

    .venv/bin/python benchmarks/noise_floor.py [--plan smoke] [--runs 5] [--force]
    .venv/bin/python benchmarks/noise_floor.py --from-results reports/noise-floor-smoke-...   # run nothing
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import results_head  # noqa: E402
from loadtests.analysis import figures, noise, stats  # noqa: E402
from loadtests.analysis.noise import NoiseFloor, NoiseRecord, StepSpread  # noqa: E402
from loadtests.analysis.samples import Side, load_side  # noqa: E402
from loadtests.errors import LoadTestError  # noqa: E402
from loadtests.report import page  # noqa: E402
from loadtests.results import RESULTS_FILE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_PLAN = "smoke"
DEFAULT_RUNS = 5
RAW_SUFFIX = ".results.json.gz"


def run_plan(plan: str, runs: int, out: Path, force: bool) -> tuple[int, float]:
    """`loadtest run --repeat N` of the plan into `out` (an SLO failing is a finding here, not an error:
    --no-gate); its exit code and how long it took."""
    loadtest = Path(sys.executable).with_name("loadtest")
    command = [str(loadtest), "run", "--plan", plan, "--repeat", str(runs), "--no-gate", "--out", str(out),
               *(["--force"] if force else [])]
    print("$ " + shlex.join(command), flush=True)
    started = time.monotonic()
    code = subprocess.run(command, check=False).returncode
    return code, time.monotonic() - started


def complete_runs(side: Side) -> tuple[Side, list[str]]:
    """The side's complete runs only (an aborted or crashed run is no sample of one build's noise), and a note
    per run left out."""
    kept = [(run, folder) for run, folder in zip(side.runs, side.folders, strict=True) if run.status == "complete"]
    notes = [f"{folder}: {run.status} ({run.error or 'no error recorded'}): left out"
             for run, folder in zip(side.runs, side.folders, strict=True) if run.status != "complete"]
    return Side(side.label, [r for r, _ in kept], [f for _, f in kept], side.notes + notes), notes


def machine_text(side: Side) -> str:
    """"2 cores, 24 GiB, Linux-...": the machine the runs recorded."""
    env = side.first.environment if isinstance(side.first.environment, dict) else {}
    machine = env.get("machine") if isinstance(env.get("machine"), dict) else {}
    parts = [f"{machine['cpus']} cores" if machine.get("cpus") else "",
             f"{machine['memory_bytes'] / 2**30:.0f} GiB" if machine.get("memory_bytes") else "",
             str(machine.get("platform") or "")]
    return ", ".join(p for p in parts if p) or "machine not recorded"


def kube_version(side: Side) -> str:
    env = side.first.environment if isinstance(side.first.environment, dict) else {}
    versions = env.get("versions") if isinstance(env.get("versions"), dict) else {}
    return str(versions.get("kubernetes") or "version not recorded")


def cell(spread: StepSpread | None, unit: str, record: NoiseRecord | None = None) -> str:
    """"41.0 ms (36.0 ms–49.0 ms, +36 %; floor +120 %)": the runs' median, min–max and spread at one step, and how
    far above a first run a second may be there (the floor compare weighs a single run against)."""
    if spread is None or not spread.values:
        return "—"
    found = stats.summarize(spread.values)
    median = page.in_unit(found.median, unit)
    if spread.bounded:
        return f"{spread.bound} {median} (only a histogram bound in {spread.bounds} of {len(spread.values)} runs)"
    if not spread.measured:
        return f"{median} ({len(spread.values)} run(s) with a value: too few)"
    pct = spread.spread_pct
    reach = "+∞ %" if pct == float("inf") else f"+{pct:.0f} %"
    low, high = page.in_unit(found.low, unit), page.in_unit(found.high, unit)
    return f"{median} ({low}–{high}, {reach}; {floor_text(record, unit)})"


def floor_text(record: NoiseRecord | None, unit: str) -> str:
    """"floor +120 %", or the range where a run gave 0."""
    if record is None:
        return "no floor"
    if record.spread_pct is None:
        return f"floor: a range of {page.in_unit(record.spread_abs, unit)} (a run gave 0)"
    return f"floor +{record.spread_pct:.0f} %"


def table(side: Side, floor: NoiseFloor) -> list[str]:
    """A row per compared figure: its spread and floor at every step, then its widest floor (what a comparison
    uses at a step that gave none)."""
    found = noise.spreads(side)
    lines = []
    for key, per_step in found.items():
        unit = figures.CHARTS[key[0]].unit
        at = {s.step_index: s for s in per_step}
        steps = floor.steps.get(noise.key_text(key), {})
        record = floor.records.get(noise.key_text(key))
        widest = (f"not measured: {floor.unmeasured.get(noise.key_text(key), '')}" if record is None
                  else f"{floor_text(record, unit)} ({record.step})")
        lines.append(f"| {noise.label(key)} | "
                     + " | ".join(cell(at.get(s.index), unit, steps.get(s.index)) for s in side.steps)
                     + f" | {widest} |")
    return lines


def write_raw(side: Side, folder: Path) -> list[Path]:
    """Each run's results.json gzip-compressed into `folder` (the files of an earlier measurement removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"*{RAW_SUFFIX}"):
        old.unlink()
    written = []
    for run, run_folder in zip(side.runs, side.folders, strict=True):
        target = folder / f"{run.run_id}{RAW_SUFFIX}"
        if target in written:  # two runs of one id: tell them apart by their folders
            target = folder / f"{run_folder.name}-{run.run_id}{RAW_SUFFIX}"
        with gzip.open(target, "wb") as out:
            out.write((run_folder / RESULTS_FILE).read_bytes())
        written.append(target)
    return written


def step_names(side: Side) -> list[str]:
    """A column per step: "1,000 nodes", or the step's own name where steps share a scale (phases)."""
    scales = [s.nodes for s in side.steps]
    return [s.name if scales.count(s.nodes) > 1 else f"{s.nodes:,} nodes" for s in side.steps]


def report(side: Side, floor: NoiseFloor, command: str, notes: Sequence[str], note: str = "") -> list[str]:
    """benchmarks/results/noise_floor_<plan>.md, in the shape every benchmark result takes."""
    setting = (f"Kubernetes {kube_version(side)}; {side.n} runs of plan {floor.plan} on fresh control planes "
               f"one after another, recorded on {machine_text(side)}; each cell: the runs' median (min–max, "
               "spread: the highest run over the lowest, max / min - 1; floor: how far above a first run a second "
               f"run of the build may be, a {(1 - stats.PREDICTION_ALPHA) * 100:.0f} % prediction interval from "
               "the runs' values, stats.prediction_ratio)." + (f" {note}" if note else ""))
    lines = results_head(f"Noise floor: the {floor.plan} plan run {side.n} times", setting, command,
                         ["figure", *step_names(side), "widest floor (step)"])
    lines += table(side, floor)
    lines += ["", "Each step's floor is what `loadtest compare` weighs a single-run change at that step of this plan "
              "against, and the widest over the steps where that step gave none (loadtests/data/noise_floor.json, "
              "read by loadtests/analysis/noise.py): a change past its threshold is a regression only where B exceeds "
              "A by more than that. A plan with no floor of its own is weighed against the widest floor of each "
              "figure over every plan's. How often this rule cries wolf and what it misses, on recorded runs: "
              "benchmarks/results/noise_floor_check.md. A step is measured only where "
              f"{stats.MIN_SAMPLES} or more runs gave a value and none was only a histogram bound (\"< 50 ms\" in "
              "every run is no measured spread); a figure never measured so stays not noise-checked.",
              "", f"Runs: {', '.join(run.run_id for run in side.runs)} (raw results: "
              f"benchmarks/results/raw/noise_floor/{floor.plan}/)."]
    if notes:
        lines += ["", "Left out: " + "; ".join(notes) + "."]
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default=DEFAULT_PLAN, help="the plan to run (a bundled name or a file)")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="runs of the plan, each on a fresh control "
                        f"plane (at least {stats.MIN_SAMPLES})")
    parser.add_argument("--from-results", type=Path, nargs="+", metavar="DIR",
                        help="read these runs (run folders or folders of repeats); run nothing")
    parser.add_argument("--run-dir", type=Path, help="where `loadtest run` writes (default: reports/noise-floor-...)")
    parser.add_argument("--force", action="store_true", help="pass --force to `loadtest run`")
    parser.add_argument("--note", default="", help="a sentence on how the runs were made, written under the "
                        "table's heading (e.g. what else ran on the machine)")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/noise_floor_<plan>.md")
    parser.add_argument("--json", type=Path, default=noise.NOISE_FLOOR_FILE,
                        help="the noise floors compare reads (the plan's floor replaced, the others kept)")
    parser.add_argument("--raw", type=Path, help="default: benchmarks/results/raw/noise_floor/<plan>")
    args = parser.parse_args(argv)
    if args.runs < stats.MIN_SAMPLES:
        parser.error(f"--runs {args.runs}: a spread needs at least {stats.MIN_SAMPLES} runs")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_results:
        folders = list(args.from_results)
        command = f".venv/bin/python benchmarks/noise_floor.py --from-results {shlex.join(map(str, folders))}"
        command += f" --note {shlex.quote(args.note)}" if args.note else ""
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = args.run_dir or ROOT / "reports" / f"noise-floor-{Path(args.plan).stem}-{stamp}"
        code, took = run_plan(args.plan, args.runs, folder, args.force)
        if code not in (0, 1):
            print(f"loadtest run exited with code {code}; measuring the runs it completed", flush=True)
        folders = [folder]
        command = (f".venv/bin/python benchmarks/noise_floor.py --plan {args.plan} --runs {args.runs}"
                   f"{' --force' if args.force else ''}; {page.duration(took)}")
    try:
        side, notes = complete_runs(load_side(folders, "noise", verb="measure the noise floor"))
    except LoadTestError as error:
        print(error, file=sys.stderr)
        return 2
    if side.n < stats.MIN_SAMPLES:
        print(f"{side.n} complete run(s) in {', '.join(map(str, folders))}: a spread needs at least "
              f"{stats.MIN_SAMPLES}", file=sys.stderr)
        return 2
    floor = noise.measure(side, date=time.strftime("%Y-%m-%d"), machine=machine_text(side), command=command)
    lines = report(side, floor, command, notes, args.note)
    out = args.out or RESULTS / f"noise_floor_{floor.plan}.md"
    raw_dir = args.raw or RESULTS / "raw" / "noise_floor" / floor.plan
    for path in (out, args.json):
        path.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    floors = noise.load(args.json) if args.json.exists() else noise.NoiseFloors()
    args.json.write_text(json.dumps(floors.with_floor(floor).to_dict(), indent=1, ensure_ascii=False) + "\n",
                         encoding="utf-8")
    raw = write_raw(side, raw_dir)
    print("\n".join(lines))
    print(f"written: {out}, {args.json} (plan {floor.plan}), {len(raw)} raw result file(s) in {raw_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
