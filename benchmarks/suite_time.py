"""How long the test suite takes here, and where the time goes: `make test` with pytest's JUnit XML, then the
total, each folder's share and the slowest tests, so the suite's budget (25 minutes on a cached 2-core machine)
is checked against a measurement, and a slow test is found by name; then the quicker tiers' wall times
(`make unit-test`, `make quick-test`), one after the other on the same machine.

    .venv/bin/python benchmarks/suite_time.py [--slowest 25] [--no-tiers] [--from-xml FILE]

--from-xml runs nothing: the table is rebuilt from a kept XML (and its tiers file, when kept beside it).
Written: benchmarks/results/suite_time.md, benchmarks/results/raw/suite_time.xml.gz (pytest's JUnit XML) and
benchmarks/results/raw/suite_time_tiers.json.gz (each tier's command, wall time and exit code).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RAW = RAW_DIR / "suite_time.xml.gz"
RAW_TIERS = RAW_DIR / "suite_time_tiers.json.gz"
TIERS = {"unit": ["make", "unit-test"], "quick": ["make", "quick-test"]}
BUDGET_S = 25 * 60


def minutes(seconds: float) -> str:
    whole, rest = divmod(round(seconds), 60)
    return f"{whole} min {rest:02d} s"


def cases(xml: bytes) -> list[tuple[str, str, float, str]]:
    """(file, test, seconds, outcome) per test case of pytest's JUnit XML."""
    found = []
    for case in ET.fromstring(xml).iter("testcase"):
        outcome = ("failed" if case.find("failure") is not None or case.find("error") is not None
                   else "skipped" if case.find("skipped") is not None else "passed")
        classname = case.get("classname", "")
        parts = classname.split(".")
        module = "/".join(p for p in parts if not p[:1].isupper())  # tests.unit.test_x.TestY -> tests/unit/test_x
        found.append((module + ".py", case.get("name", ""), float(case.get("time") or 0), outcome))
    return found


def report(found: list[tuple[str, str, float, str]], wall_s: float | None, command: str, slowest: int,
           tiers: list[dict[str, object]] | None = None) -> list[str]:
    total = sum(seconds for _, _, seconds, _ in found)
    outcomes: dict[str, int] = defaultdict(int)
    for *_, outcome in found:
        outcomes[outcome] += 1
    lines = results_head("Test suite time", "the suite as `make test` runs it (binaries and the browser already "
                         "provided); seconds as pytest's JUnit XML records them (setup and teardown of each test "
                         "included; with the suite's workers in parallel they add up to more than the wall time), "
                         "wall time as this script measured it.", command,
                         ["folder", "tests", "time (summed over the workers)", "share"])
    by_folder: dict[str, list[float]] = defaultdict(list)
    for path, _, seconds, _ in found:
        by_folder["/".join(path.split("/")[:2])].append(seconds)
    for folder, times in sorted(by_folder.items(), key=lambda item: -sum(item[1])):
        share = 100 * sum(times) / max(total, 1e-9)
        lines.append(f"| {folder} | {len(times)} | {minutes(sum(times))} | {share:.0f} % |")
    shown = f"{minutes(wall_s)} wall time" if wall_s is not None else "wall time not measured (read from XML)"
    lines += ["", f"{len(found)} tests ({', '.join(f'{n} {k}' for k, n in sorted(outcomes.items()))}): "
                  f"{minutes(total)} in tests, {shown}; the budget is {minutes(BUDGET_S)} "
                  f"({'within' if (wall_s or total) <= BUDGET_S else 'over'} it).",
              "", f"The {slowest} slowest tests:", "", "| test | time |", "|---|---|"]
    for path, name, seconds, _ in sorted(found, key=lambda case: -case[2])[:slowest]:
        lines.append(f"| {path}::{name} | {seconds:.1f} s |")
    lines += ["", "The tiers, each run after `make test` (wall time, this script's clock):", "",
              "| tier | command | wall time | exit code |", "|---|---|---|---|"]
    for tier in tiers or []:
        lines.append(f"| {tier['tier']} | `{' '.join(tier['command'])}` | {minutes(float(tier['wall_s']))} | "
                     f"{tier['code']} |")
    if not tiers:
        lines.append("| — | not measured (--no-tiers, or rebuilt from an XML without its tiers file) | — | — |")
    lines += ["", "Raw results (pytest's JUnit XML; the tiers' times): benchmarks/results/raw/suite_time.xml.gz, "
              "benchmarks/results/raw/suite_time_tiers.json.gz."]
    return lines


def time_tiers() -> list[dict[str, object]]:
    """Each quicker tier's wall time, one after the other."""
    found: list[dict[str, object]] = []
    for tier, command in TIERS.items():
        started = time.monotonic()
        code = subprocess.run(command, cwd=ROOT, check=False).returncode
        found.append({"tier": tier, "command": command, "wall_s": round(time.monotonic() - started, 1), "code": code})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slowest", type=int, default=25)
    parser.add_argument("--from-xml", type=Path, help="read this JUnit XML (plain or .gz) instead of running")
    parser.add_argument("--no-tiers", action="store_true", help="time `make test` only")
    args = parser.parse_args()
    command = ".venv/bin/python benchmarks/suite_time.py"
    wall_s: float | None = None
    tiers: list[dict[str, object]] | None = None
    if args.from_xml:
        data = args.from_xml.read_bytes()
        xml = gzip.decompress(data) if args.from_xml.suffix == ".gz" else data
        kept = args.from_xml.with_name(RAW_TIERS.name)
        tiers = json.loads(gzip.decompress(kept.read_bytes())) if kept.is_file() else None
    else:
        out = ROOT / ".suite-time.xml"
        started = time.monotonic()
        code = subprocess.run(["make", "test", f"PYTEST_ARGS=--junitxml={out}"], cwd=ROOT, check=False).returncode
        wall_s = time.monotonic() - started
        xml = out.read_bytes()
        out.unlink()
        keep_raw(RAW.name, xml)
        if code != 0:
            print(f"make test exited {code}: the times are written, the suite did not pass", file=sys.stderr)
        if not args.no_tiers:
            tiers = time_tiers()
            keep_raw(RAW_TIERS.name, tiers)
    target = RESULTS / "suite_time.md"
    target.write_text("\n".join(report(cases(xml), wall_s, command, args.slowest, tiers)) + "\n")
    print(f"written: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
