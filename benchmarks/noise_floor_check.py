"""How often does the single-run noise floor call noise a regression, and what does it miss? Measured on the
recorded runs behind each plan's floor (benchmarks/results/raw/noise_floor/<plan>/), with the judge
`loadtest compare` uses.

1. False alarms, leave one out: for each run k of a plan's n noise runs, the floor measured from the other n - 1
   runs (as benchmarks/noise_floor.py measures it), then run k compared as B against each of the others as A,
   single run against single run. A pair with any regression is a false alarm: all are runs of one build. (With
   n - 1 runs the floor is wider than the shipped one's n, through the t quantile; the rate is of that rule.)
2. Runs left out of a floor (benchmarks/results/raw/noise_floor/<plan>/left-out/): each compared both ways with
   each run of the floor, against the shipped floor: runs of the same build the floor never saw.
3. Misses: each noise run against a copy of itself with every latency multiplied by 1.5, 2 and 3 (server, client,
   pod startup and watch delay p99s; CPU, memory and sizes unchanged), against the shipped floor: the share of
   copies with no regression found, and the regressions found per copy.

Writes benchmarks/results/noise_floor_check.md and raw/noise_floor_check.json.gz. No control plane: a minute.

    .venv/bin/python benchmarks/noise_floor_check.py [--plan default --plan smoke]   # default: every plan recorded
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.recorded import raw_run_folder, scale_latencies  # noqa: E402
from loadtests.analysis import noise, stats  # noqa: E402
from loadtests.analysis.judge import judge_sides  # noqa: E402
from loadtests.analysis.samples import load_side  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "noise_floor_check.md"
FACTORS = (1.5, 2.0, 3.0)


def regressions(a: Path, b: Path, floor: noise.NoiseFloor) -> list[str]:
    """B's regressions against A, single runs weighed against `floor`: "POST pods at 100 nodes"."""
    found = judge_sides(load_side([a], "A"), load_side([b], "B"), floor=floor)
    return [f"{row.name} at {row.nodes:,} nodes" for row in found.regressions]


def floor_of(folders: list[Path]) -> noise.NoiseFloor:
    return noise.measure(load_side(folders, "noise"), date="check")


def leave_one_out(folders: list[Path]) -> list[dict[str, Any]]:
    """Each run against each other one, weighed against the floor of the runs but itself."""
    pairs = []
    for k, held in enumerate(folders):
        rest = folders[:k] + folders[k + 1:]
        floor = floor_of(rest)
        pairs += [{"a": a.name, "b": held.name, "regressions": regressions(a, held, floor)} for a in rest]
    return pairs


def left_out(folders: list[Path], others: list[Path], floor: noise.NoiseFloor) -> list[dict[str, Any]]:
    """Runs the floor never saw, both ways against each of its runs."""
    return [{"a": a.name, "b": b.name, "regressions": regressions(a, b, floor)}
            for other in others for run in folders for a, b in ((run, other), (other, run))]


def misses(raws: list[Path], folders: list[Path], floor: noise.NoiseFloor, tmp: Path) -> list[dict[str, Any]]:
    """Each run against itself with every latency times each factor."""
    found = []
    for factor in FACTORS:
        for raw, folder in zip(raws, folders, strict=True):
            slower = raw_run_folder(raw, tmp / f"x{factor:g}" / folder.name, scale_latencies(factor))
            found.append({"factor": factor, "a": folder.name, "regressions": regressions(folder, slower, floor)})
    return found


def check_plan(plan: str, tmp: Path) -> dict[str, Any]:
    raw_dir = RAW_DIR / "noise_floor" / plan
    raws = sorted(raw_dir.glob("*.results.json.gz"))
    folders = [raw_run_folder(r, tmp / plan / r.name.split(".")[0]) for r in raws]
    others = [raw_run_folder(r, tmp / plan / "left-out" / r.name.split(".")[0])
              for r in sorted((raw_dir / "left-out").glob("*.results.json.gz"))]
    floor = noise.load().floors[plan]
    return {"plan": plan, "runs": len(folders), "leave_one_out": leave_one_out(folders),
            "left_out": left_out(folders, others, floor), "misses": misses(raws, folders, floor, tmp / plan)}


def share(rows: list[dict[str, Any]], alarmed: bool = True) -> str:
    hit = sum(bool(r["regressions"]) == alarmed for r in rows)
    return f"{hit} of {len(rows)}" if rows else "—"


def examples(rows: list[dict[str, Any]]) -> str:
    seen: dict[str, int] = {}
    for row in rows:
        for name in row["regressions"]:
            seen[name] = seen.get(name, 0) + 1
    top = sorted(seen.items(), key=lambda kv: -kv[1])[:4]
    return "; ".join(f"{name} ({n})" for name, n in top) or "none"


def table(found: list[dict[str, Any]]) -> list[str]:
    lines = []
    for plan in found:
        lines.append(f"| {plan['plan']} ({plan['runs']} runs) | false alarms, leave one out | "
                     f"{share(plan['leave_one_out'])} pairs | {examples(plan['leave_one_out'])} |")
        if plan["left_out"]:
            lines.append(f"| {plan['plan']} | false alarms, runs left out of the floor | "
                         f"{share(plan['left_out'])} pairs | {examples(plan['left_out'])} |")
        for factor in FACTORS:
            rows = [r for r in plan["misses"] if r["factor"] == factor]
            counts = sorted(len(r["regressions"]) for r in rows)
            lines.append(f"| {plan['plan']} | latencies ×{factor:g}: missed | {share(rows, alarmed=False)} copies "
                         f"(regressions found per copy: {', '.join(map(str, counts))}) | {examples(rows)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="append",
                        help="a plan with recorded noise runs (default: every plan in raw/noise_floor/)")
    args = parser.parse_args(argv)
    recorded = sorted(p.name for p in (RAW_DIR / "noise_floor").iterdir() if p.is_dir())
    plans = args.plan or ["default", *[p for p in recorded if p != "default"]]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        found = [check_plan(plan, Path(tmp)) for plan in plans]
    took = time.monotonic() - started
    setting = (f"single run against single run, judged as `loadtest compare` judges them, each step weighed "
               f"against its floor (a {(1 - stats.PREDICTION_ALPHA) * 100:.0f} % prediction interval from the noise "
               f"runs, loadtests/analysis/noise.py); the runs: benchmarks/results/raw/noise_floor/<plan>/; "
               f"{took:.0f} s.")
    command = ".venv/bin/python benchmarks/noise_floor_check.py" + "".join(f" --plan {p}" for p in args.plan or [])
    lines = results_head("Noise floor check: false alarms and misses of single-run comparisons", setting, command,
                         ["plan", "what", "how often", "figures that fired (pairs)"])
    lines += table(found)
    lines += ["", "A false alarm is a pair of runs of one build with any regression; a miss is a slower copy with "
              "none. Leave one out measures the floor from one run fewer than the shipped floor has, so its t "
              "quantile is larger; the runs left out were never part of any floor."]
    raw = keep_raw("noise_floor_check.json.gz", found)
    write_results(RESULTS, lines, also=f", {raw}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
