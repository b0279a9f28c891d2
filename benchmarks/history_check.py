"""What `loadtest history`'s change points do on short series, and what the history says of recorded runs.

1. Seeded series of pure noise (uniform, up to ±2 %) and the same with a +60 % step at the last run: how often
   Otava's E-divisive means (Hunter) finds a change point in noise, with the history's smallest relative change
   (analysis/history.MIN_MAGNITUDE) and without it (Otava's default, 0), and how often it misses a step that only
   the last run shows (what `--gate` looks for), and misses it again when one more run is added.
2. The history of recorded runs: the 8 runs of the smoke plan's upgrade rehearsal in start order (4 on v1.36.3,
   then 4 on v1.37.2; benchmarks/results/raw/rehearsal_smoke/), and the 5 runs of one build behind the noise floor
   (benchmarks/results/raw/noise_floor/smoke/). Every change point found is listed with its verdict.

Writes benchmarks/results/history_check.md and its raw numbers. No control plane: a few seconds.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.recorded import raw_run_folder  # noqa: E402
from loadtests.analysis.history import MIN_MAGNITUDE, History, change_points, history, load_points  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "history_check.md"
NOISE = 0.02
STEP = 1.6


def synthetic(series: int, seed: int) -> list[dict[str, float]]:
    """Per history length: the share of noise series with a change point (with and without the smallest change),
    and of last-run steps missed (at the last run, and still with one more run after it)."""
    rng = random.Random(seed)
    rows = []
    for n in (10, 20):
        noise_any = noise_floor = missed = missed_twice = 0
        for _ in range(series):
            base = [1 + rng.uniform(-NOISE, NOISE) for _ in range(n + 1)]
            noise_any += bool(change_points(base[:n], min_magnitude=0.0))
            noise_floor += bool(change_points(base[:n]))
            last = base[:n - 1] + [base[n - 1] * STEP]
            found_last = any(c.index == n - 1 for c in change_points(last))
            missed += not found_last
            then = any(c.index == n - 1 for c in change_points([*last, base[n] * STEP]))
            missed_twice += not found_last and not then
        rows.append({"runs": n, "series": series, "noise_changes_otava_default": noise_any / series,
                     "noise_changes": noise_floor / series, "last_step_missed": missed / series,
                     "last_step_missed_twice": missed_twice / series})
    return rows


def _folders(raw: Path, names: list[str], tmp: Path) -> list[Path]:
    """Each raw run (results.json, gzipped; or a plan benchmark's record holding it) as a run folder."""
    return [raw_run_folder(raw / name, tmp / raw.name / name.removesuffix(".gz").removesuffix(".json")
                           .removesuffix(".results")) for name in names]


def recorded(tmp: Path) -> dict[str, History]:
    rehearsal = RAW_DIR / "rehearsal_smoke"
    noise = RAW_DIR / "noise_floor" / "smoke"
    found = {}
    for title, raw, names in (
            ("upgrade rehearsal, smoke plan: 4 runs of v1.36.3 then 4 of v1.37.2", rehearsal,
             [f"{v}-{k}.json.gz" for v in ("v1.36.3", "v1.37.2") for k in range(1, 5)]),
            ("noise floor, smoke plan: 5 runs of one build", noise,
             [f"repeat-{k}.results.json.gz" for k in range(1, 6)])):
        points, notes = load_points(_folders(raw, names, tmp))
        found[title] = history(points, notes=notes)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=2000, help="seeded series per history length")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    rows = synthetic(args.series, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        histories = recorded(Path(tmp))
    command = f".venv/bin/python benchmarks/history_check.py --series {args.series} --seed {args.seed}"
    lines = results_head("History: change points on short series, and on recorded runs",
                         f"Apache Otava 0.8.0, seed {args.seed}, uniform noise up to ±{NOISE:.0%}, steps of "
                         f"+{STEP - 1:.0%}; {time.monotonic() - started:.0f} s",
                         command, ["runs", "series", "noise with a change point, Otava's default (0)",
                                   f"noise with a change point, > {MIN_MAGNITUDE:.0%} (the history's)",
                                   "last-run step missed", "missed again with one more run"])
    for row in rows:
        lines.append(f"| {row['runs']} | {row['series']:,} | {row['noise_changes_otava_default']:.1%} | "
                     f"{row['noise_changes']:.2%} | {row['last_step_missed']:.1%} | "
                     f"{row['last_step_missed_twice']:.1%} |")
    raw: dict[str, object] = {"synthetic": rows, "recorded": {}}
    for title, found in histories.items():
        lines += ["", f"## {title}", "", f"`{found.headline}`", ""]
        if found.changes:
            lines += ["| step | figure | from run | mean before → after | change | p | verdict |",
                      "|---|---|---|---|---|---|---|"]
            for track, change in found.changes:
                means = found.describe(track, change).split(" (")[0]
                lines.append(f"| {track.step_name} | {track.label} | {change.position + 1} "
                             f"({found.points[change.position].label}) | {means} "
                             f"| {change.change_text} | {change.p_text} | {change.status} |")
        bounded = len(found.bounded_tracks)
        lines += ["", f"{bounded} of {len(found.tracks)} figure series hold values that are only histogram bounds."]
        raw["recorded"][title] = [{"step": t.step_name, "figure": t.label, "position": c.position,
                                   "pvalue": c.pvalue, "rel_change": c.rel_change, "status": c.status}
                                  for t, c in found.changes]
    keep_raw("history_check.json.gz", raw)
    lines += ["", "Raw numbers: benchmarks/results/raw/history_check.json.gz."]
    write_results(RESULTS, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
