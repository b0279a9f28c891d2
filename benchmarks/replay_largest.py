"""The largest k at which this machine replays a captured cluster, and where it stops: the profile kept by
benchmarks/replay_fidelity.py (its production cluster, captured from its audit log) replayed at k = 1, 2, 4, 8 …
(`loadtest run --profile profile.yaml --scale K --duration D --no-gate`, a fresh control plane each) until a k does
not hold.

A k held when the run finished with its replay compared, every fidelity target judged was met (counts, sizes,
rates, watches, the replayable share: docs/profile.md), every scenario achieved at least 90 % of the rate it was
asked, the step did not saturate and no SLO failed (run/capacity.step_failures), and the sizing check let it run.
With --force the sizing check's verdict is recorded but does not stop the climb: the run shows whether the machine
held what the estimate says it cannot.

    .venv/bin/python benchmarks/replay_largest.py [--up-to 64] [--duration 20] [--force]
    .venv/bin/python benchmarks/replay_largest.py --from-raw      # rebuild the table, run nothing

Writes benchmarks/results/replay_largest.md and, gzip-compressed, each replay's results.json and the climb's
record (per k: nodes, the sizing check's verdict, exit code, wall time) in benchmarks/results/raw/replay_largest/.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.plan_runs import cpu, machine, outcome, short_of_asked  # noqa: E402
from benchmarks.replay_fidelity import RAW as FIDELITY_RAW  # noqa: E402
from benchmarks.replay_fidelity import number, replay, rows  # noqa: E402
from loadtests import results as results_mod  # noqa: E402
from loadtests.analysis.slo import thresholds  # noqa: E402
from loadtests.capture import profile as profile_mod  # noqa: E402
from loadtests.capture import replay as replay_mod  # noqa: E402
from loadtests.capture.compare import MET, MISSED  # noqa: E402
from loadtests.config import sizing  # noqa: E402
from loadtests.results import RunResult, StepResult  # noqa: E402
from loadtests.run.capacity import step_failures  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "replay_largest.md"
RAW = "replay_largest"  # under benchmarks/results/raw/
KEPT_PROFILE = RAW_DIR / FIDELITY_RAW / "profile.yaml.gz"
FAMILIES = ("counts", "sizes", "rates", "watches")


def scales(up_to: float) -> list[float]:
    """1, 2, 4 … up to `up_to`."""
    found, k = [], 1.0
    while k <= up_to:
        found.append(k)
        k *= 2
    return found


def climb_dir(duration: float) -> str:
    """A climb's raw results, one folder per window length (under benchmarks/results/raw/)."""
    return f"{RAW}/{duration:g}s"


def measure(profile: Path, k: float, duration: float, force: bool, scratch: Path) -> dict[str, Any]:
    """One replay at k, with the sizing check's verdict on its plan (the run itself refuses it without --force)."""
    plan = replay_mod.plan_of(profile_mod.load(profile), k, source=profile.name, duration_s=duration)
    beyond = sizing.beyond_this_machine(plan) or ""
    run = replay(profile, k, duration, scratch / f"run-{k:g}", climb_dir(duration), *(["--force"] if force else []))
    return {"k": k, "nodes": plan.steps[0].nodes, "sizing": beyond, "exit_code": run.exit_code,
            "wall_s": run.wall_s, "said": run.said, "forced": force, "duration": duration}


def results_of(record: dict[str, Any]) -> RunResult | None:
    path = RAW_DIR / climb_dir(record["duration"]) / f"results-k{record['k']:g}.json.gz"
    if not path.exists():
        return None
    return results_mod.from_dict(json.loads(gzip.decompress(path.read_bytes())))


def fidelity_failures(step: StepResult) -> list[str]:
    """The fidelity targets missed at a step (original × k against the replay), or why it was not compared."""
    found = step.replay_fidelity
    if found is None or not found.compared:
        return [f"fidelity not compared: {found.error if found else 'no replay_fidelity section'}"]
    missed = [f"{section} {name}: original × k {number(figure.get('original'))}, replay "
              f"{number(figure.get('replay'))}"
              for section, name, figure, _note in rows(found.compared) if figure["verdict"] == MISSED]
    return [f"fidelity missed: {row}" for row in missed] or ([] if found.compared.get("passed") else
                                                            ["fidelity not passed (no row missed)"])


def failures(record: dict[str, Any], run: RunResult | None) -> list[str]:
    """Why a k did not hold, in words (empty: it held)."""
    refused = [f"sizing check: {record['sizing']}"] if record["sizing"] and not record["forced"] else []
    if run is None:
        return refused or [f"no results (exit {record['exit_code']}): {record['said']}"]
    found = refused + ([f"the run did not finish: {run.error or run.status}"] if run.status != "complete" else [])
    for step in run.steps:
        found += fidelity_failures(step) + step_failures(step, thresholds(run))
        if (short := short_of_asked(step)) != "none":
            found.append(f"short of the asked rate: {short}")
    return found


def family(step: StepResult, section: str) -> str:
    """"met of judged" for a family of fidelity targets, with the missed ones counted."""
    found = step.replay_fidelity
    if found is None or not found.compared:
        return "not compared"
    verdicts = [figure["verdict"] for part, _n, figure, _note in rows(found.compared) if part == section]
    met, missed = verdicts.count(MET), verdicts.count(MISSED)
    return f"{met}/{met + missed}" + (f" (**{missed} missed**)" if missed else "")


def requests_rate(step: StepResult) -> str:
    rate = next((r for r in step.rates if r.scenario == "requests"), None)
    return "not measured" if rate is None else f"{rate.asked_per_s:,.0f} → {rate.achieved_per_s:,.0f}"


def others(step: StepResult) -> str:
    """The machine's CPU not spent by this run's processes: the soak, tests and whatever else ran beside it."""
    if step.machine_cpu_percent is None or not step.processes:
        return "not measured"
    return f"{step.machine_cpu_percent - sum(p.cpu_percent for p in step.processes):.0f} %"


def table_line(record: dict[str, Any], run: RunResult | None) -> str:
    k, held = f"{record['k']:g}", "yes" if not failures(record, run) else "**no**"
    fits = "refused" if record["sizing"] else "fits"
    if run is None or not run.steps:
        return f"| {k} | {record['nodes']:,} | — | — | — | — | — | — | not run ({record['said']}) | — | — | — | — | " \
               f"{fits} | {held} |"
    step = run.steps[0]
    objects = f"{step.replay_fidelity.objects_read:,}" if step.replay_fidelity else "not measured"
    return (f"| {k} | {step.nodes:,} | {objects} | {requests_rate(step)} | "
            + " | ".join(family(step, f) for f in FAMILIES)
            + f" | {outcome(step, run)} | {cpu(step, 'loadgen')} | {cpu(step, 'kube-apiserver')} | "
            f"{machine(step)} | {others(step)} | {fits} | {held} |")


def busiest(step: StepResult, top: int = 3) -> str:
    found = sorted(step.processes, key=lambda p: p.cpu_percent, reverse=True)[:top]
    return ", ".join(f"{p.component} {p.cpu_percent:.0f} %" for p in found) or "processes not measured"


def verdict(records: list[dict[str, Any]], runs: list[RunResult | None]) -> str:
    """The largest k held, the first that did not and why, with what was busiest there."""
    held = [r["k"] for r, run in zip(records, runs, strict=True) if not failures(r, run)]
    broke = next(((r, run) for r, run in zip(records, runs, strict=True) if failures(r, run)), None)
    line = f"Largest k held: {max(held):g}" if held else "No k held"
    if broke is None:
        return f"{line} (the largest tried; where it stops is beyond it)."
    record, run = broke
    line += f"; at k = {record['k']:g} ({record['nodes']:,} nodes) it stopped: {'; '.join(failures(record, run))}"
    if run is not None and run.steps:
        step = run.steps[0]
        line += (f". Busiest there (of one core each): {busiest(step)}; the machine {machine(step)} of 200 % "
                 f"(others' share {others(step)})")
    return line + "."


COLUMNS = ["k", "nodes", "objects (replay's capture)", "requests/s asked → achieved", *FAMILIES,
           "SLOs / saturation", "loadgen CPU", "apiserver CPU", "machine CPU avg / max (of 200 %)", "others' share",
           "sizing check", "held"]


def section(kept: dict[str, Any]) -> list[str]:
    """One climb: its table per k, where it stopped and why, the sizing check's verdict, each run's time."""
    records = kept["records"]
    runs = [results_of(r) for r in records]
    refused = [r["k"] for r in records if r["sizing"]]
    lines = [table_line(r, run) for r, run in zip(records, runs, strict=True)]
    lines += ["", verdict(records, runs), ""]
    if refused:
        lines += [f"The sizing check refuses k ≥ {min(refused):g}"
                  + (" (run anyway with --force, to see whether the machine held it): " if records[0]["forced"]
                     else ": ") + next(r["sizing"] for r in records if r["sizing"]), ""]
    return lines + [", ".join(f"k = {r['k']:g}: `loadtest run` {r['wall_s']:.0f} s, exit {r['exit_code']}"
                              + rates_window(run) for r, run in zip(records, runs, strict=True)) + "."]


def rates_window(run: RunResult | None) -> str:
    """The seconds of the window the replay's rates covered (whole renewal periods of its nodes' Leases); "" where
    its results do not say (older runs: the whole window)."""
    found = run.steps[0].replay_fidelity if run is not None and run.steps else None
    kept = found.rates_window if found is not None else None
    if kept is None:
        return ""
    whole = 0 if kept.period_s is None else round(kept.kept_s / kept.period_s)
    periods = "" if not whole else f", {whole} period{'s' if whole != 1 else ''} of {kept.period_s:.2f} s"
    return f", rates over {kept.kept_s:.1f} s of {kept.window_s:.1f}{periods}"


def report(climbs: list[dict[str, Any]]) -> list[str]:
    """The longest window's climb first (the answer), then each shorter one under a heading of its own."""
    climbs = sorted(climbs, key=lambda kept: -kept["duration"])
    first = climbs[0]
    lines = results_head(
        "The largest k this machine replays a captured cluster at",
        f"the profile of benchmarks/replay_fidelity.py's production cluster (raw/{FIDELITY_RAW}/profile.yaml.gz) "
        f"replayed for {first['duration']:g} s at each k, a fresh control plane each, until a k did not hold; the "
        "machine is shared (others' share: its CPU not spent by the run's own processes)",
        first["command"], COLUMNS)
    lines += section(first)
    for kept in climbs[1:]:
        lines += ["", f"## A window of {kept['duration']:g} s", "", f"Command: `{kept['command']}`", "",
                  "| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|", *section(kept)]
    return lines + ["", "Families: fidelity targets met of those judged (the replayable share and rows not judged "
                    "left out; benchmarks/results/replay_fidelity.md lists them). CPU of a process: its average "
                    "over the step, 100 % = one core (the load generator is one process: it saturates near "
                    "100 %). Windows: the nodes' Lease renewals come in rounds (docs/profile.md, `start_up`); a "
                    "replay's rates are taken over whole renewal periods of its window (docs/profile.md, `rounds`), "
                    "each round counted once, as a run says (`rates over`). Runs without that figure (the 120 s "
                    "climb's) took the whole window, which could count a round too many or too few: up to a period "
                    "over the window (about half at 20 s, a tenth at 120 s) of the renewal rate.", "",
                    f"Raw: benchmarks/results/raw/{RAW}/<window>s/ (climb.json.gz, the record per k; "
                    "results-k<K>.json.gz, each replay's results.json)."]


def climb(args: argparse.Namespace, command: str) -> None:
    """Replay at each k in turn, each record kept before the next starts; stop at the first k that does not hold."""
    for old in (RAW_DIR / climb_dir(args.duration)).glob("results-k*.json.gz"):
        old.unlink()
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="replay-largest-") as tmp:
        os.environ["LOADTEST_CLUSTERS"] = str(Path(tmp) / "clusters")  # this benchmark's clusters, no one else's
        profile = Path(tmp) / "profile.yaml"
        profile.write_bytes(gzip.decompress(KEPT_PROFILE.read_bytes()))
        for k in scales(args.up_to):
            records.append(measure(profile, k, args.duration, args.force, Path(tmp)))
            keep_raw(f"{climb_dir(args.duration)}/climb.json.gz",
                     {"command": command, "duration": args.duration, "records": records})
            if failures(records[-1], results_of(records[-1])):
                break


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--up-to", type=float, default=64.0, help="the largest k tried")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of each replay's window")
    parser.add_argument("--force", action="store_true", help="run past the sizing check's refusal, recording it")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept raw results")
    args = parser.parse_args()
    command = (f".venv/bin/python benchmarks/replay_largest.py --up-to {args.up_to:g} --duration {args.duration:g}"
               + (" --force" if args.force else ""))
    if not args.from_raw:
        climb(args, command)
    climbs = [json.loads(gzip.decompress(path.read_bytes())) for path in (RAW_DIR / RAW).glob("*/climb.json.gz")]
    write_results(RESULTS, report(climbs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
