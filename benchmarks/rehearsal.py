"""An upgrade rehearsal as the README shows it: `loadtest rehearse` of a plan (or of a captured cluster's profile,
replayed at a scale) from one version to another, each side repeated, and the comparison's own verdict lines,
with every run's results kept so the comparison can be made again from them (`--from-raw`).

    .venv/bin/python benchmarks/rehearsal.py [--plan smoke] [--from v1.36.3] [--to v1.37.2] [--repeat 4]
    .venv/bin/python benchmarks/rehearsal.py --profile P.yaml[.gz] --scale K --duration S --repeat 1
    .venv/bin/python benchmarks/rehearsal.py --from-raw      # compare the kept runs again, run nothing

Written: benchmarks/results/rehearsal_<plan>.md and benchmarks/results/raw/rehearsal_<plan>/<version>-<k>.json.gz
(a profile's: rehearsal_profile-<its name>).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from loadtests.analysis.samples import load_side, repeat_folders  # noqa: E402
from loadtests.config.versions import DEFAULT_KUBE_VERSION, PREVIOUS_KUBE_VERSION  # noqa: E402
from loadtests.report.compare import compare_sides  # noqa: E402
from loadtests.results import RESULTS_FILE  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def loadtest(*args: str) -> tuple[int, str, float]:
    """A `loadtest` command's exit code, its output (stdout then stderr) and how long it took."""
    command = [str(Path(sys.executable).with_name("loadtest")), *args]
    print("$ " + shlex.join(command), flush=True)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def keep_runs(base: Path, versions: tuple[str, str], raw: Path) -> None:
    for old in raw.glob("*.json.gz"):
        old.unlink()
    for version in versions:
        for k, folder in enumerate(repeat_folders(base / version) or [base / version], 1):
            if (folder / RESULTS_FILE).is_file():
                keep_raw(f"{raw.name}/{version}-{k}.json.gz", (folder / RESULTS_FILE).read_bytes())


def unpack_raw(raw: Path, versions: tuple[str, str], into: Path) -> dict[str, list[Path]]:
    sides: dict[str, list[Path]] = {}
    for version in versions:
        for path in sorted(raw.glob(f"{version}-*.json.gz"), key=lambda p: int(p.name.split("-")[-1].split(".")[0])):
            folder = into / path.name.removesuffix(".json.gz")
            folder.mkdir(parents=True)
            (folder / RESULTS_FILE).write_bytes(gzip.decompress(path.read_bytes()))
            sides.setdefault(version, []).append(folder)
    if len(sides) != 2:
        raise SystemExit(f"{raw}: no kept runs of both {versions[0]} and {versions[1]}; run without --from-raw")
    return sides


def verdict_lines(output: str) -> list[str]:
    """What the comparison said of the figures: its changes and its last lines (not the progress lines)."""
    keep = ("REGRESSION", "IMPROVED", "CHANGE", "regression", "no regression", "~", "loadtest:")
    return [line for line in output.splitlines() if line.strip().startswith(keep)]


def significant(sides: dict[str, list[Path]], versions: tuple[str, str], out: Path) -> list[str]:
    """Every figure the rank test found different between the versions (p < alpha), regression or not."""
    result = compare_sides(load_side(sides[versions[0]], "A"), load_side(sides[versions[1]], "B"), out)
    rows = [r for r in result.rows if r.p_value is not None and r.p_value < r.alpha]
    tested = sum(r.p_value is not None for r in result.rows)
    lines = [f"{len(rows)} of the {tested} figures the rank test could weigh differ at p < "
             f"{result.thresholds.get('alpha', 0.05):g}:", "",
             "| step | figure | A (median) | B (median) | change | p | regression |", "|---|---|---|---|---|---|---|"]
    for r in rows:  # medians as the comparison shows them: a histogram bound marked ("<" at most, ">" at least)
        change = "—" if r.change_pct is None else f"{r.change_prefix}{r.change_pct:+.0f} %"
        lines.append(f"| {r.step_name} | {r.chart}: {r.name} | {r.side_text('a')} | {r.side_text('b')} | {change} | "
                     f"{r.p_value:.3f} | {'yes' if r.regression else 'no'} |")
    return lines


def fidelity_lines(sides: dict[str, list[Path]]) -> list[str]:
    """Each run's replay fidelity (a profile's rehearsal): targets met, missed, not measured and not judged."""
    lines = []
    for version, folders in sides.items():
        for k, folder in enumerate(folders, 1):
            for step in json.loads((folder / RESULTS_FILE).read_text()).get("steps") or []:
                compared = (step.get("replay_fidelity") or {}).get("compared")
                if compared:
                    verdicts = compared.get("targets") or {}
                    lines.append(f"- {version} run {k}, step {step.get('name')}: replay fidelity passed "
                                 f"{compared.get('passed')} ({', '.join(f'{n} {v}' for v, n in verdicts.items())})")
    return lines


def subject(args: argparse.Namespace, tmp: Path) -> tuple[str, list[str], str]:
    """What is rehearsed: its name, `loadtest rehearse`'s arguments for it, and the command line said."""
    if args.profile is None:
        return args.plan, ["--plan", args.plan], f"--plan {args.plan}"
    profile = Path(args.profile)
    if profile.suffix == ".gz":  # a kept profile, as benchmarks/results/raw/ holds them
        plain = tmp / profile.name.removesuffix(".gz")
        plain.write_bytes(gzip.decompress(profile.read_bytes()))
        profile = plain
    name = f"profile-{profile.name.split('.')[0]}"
    flags = ["--profile", str(profile), "--scale", f"{args.scale:g}", "--duration", f"{args.duration:g}"]
    return name, flags, f"--profile {args.profile} --scale {args.scale:g} --duration {args.duration:g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="smoke")
    parser.add_argument("--profile", default=None, help="a captured cluster's profile to rehearse instead of a plan")
    parser.add_argument("--scale", type=float, default=1.0, help="with --profile: the replay's scale")
    parser.add_argument("--duration", type=float, default=60.0, help="with --profile: each replay's window (s)")
    parser.add_argument("--from", dest="a", default=PREVIOUS_KUBE_VERSION)
    parser.add_argument("--to", dest="b", default=DEFAULT_KUBE_VERSION)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--from-raw", action="store_true", help="compare the kept runs again")
    args = parser.parse_args()
    versions = (args.a, args.b)
    took = ""
    with tempfile.TemporaryDirectory(prefix="rehearsal-") as tmp:
        name, flags, said = subject(args, Path(tmp))
        raw = RAW_DIR / f"rehearsal_{name}"
        command = (f".venv/bin/python benchmarks/rehearsal.py {said} --from {args.a} --to {args.b} "
                   f"--repeat {args.repeat}")
        if not args.from_raw:
            base = Path(tmp) / "rehearsal"
            code, output, seconds = loadtest("rehearse", *flags, "--from", args.a, "--to", args.b,
                                             "--repeat", str(args.repeat), "--out", str(base))
            keep_runs(base, versions, raw)
            minutes, rest = divmod(round(seconds), 60)
            took = f"The rehearsal took {minutes} min {rest:02d} s end to end and exited {code}."
            keep_raw(f"{raw.name}/command.json.gz", {"command": command, "took": took})
        else:
            kept = json.loads(gzip.decompress((raw / "command.json.gz").read_bytes()))
            command, took = kept["command"], kept["took"]
        sides = unpack_raw(raw, versions, Path(tmp) / "raw")
        code, output, _ = loadtest("compare", "--a", *map(str, sides[args.a]), "--b", *map(str, sides[args.b]),
                                   "--out", str(Path(tmp) / "compare"))
        differ = significant(sides, versions, Path(tmp) / "significant")
        fidelity = fidelity_lines(sides)
    what = f"the {args.plan} plan" if args.profile is None else f"a captured cluster ({said})"
    lines = results_head(f"Upgrade rehearsal of {what}: {args.a} → {args.b}",
                         f"{len(sides[args.a])} runs of {args.a} and {len(sides[args.b])} of {args.b}, each on a "
                         "fresh control plane; below, what `loadtest compare --a ... --b ...` of the kept runs "
                         f"said (exit {code}).", command, ["comparison"])[:-3]
    lines += ["", took, "", "```", *verdict_lines(output), "```", "", *fidelity, *([""] if fidelity else []),
              *differ, "", f"Raw results (each run's results.json): benchmarks/results/raw/rehearsal_{name}/."]
    target = RESULTS / f"rehearsal_{name}.md"
    write_results(target, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
