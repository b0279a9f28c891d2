"""Every lesson of the field reports, each variant repeated, into the README's lesson table.

Runs `loadtest lesson all` (or the lessons named) at a scale with `--repeat N` (each variant N times on a fresh
control plane), then writes benchmarks/results/lessons.md: the run's own lessons.md table under the machine,
versions and command, with each lesson's headline; and keeps the raw results (each lesson's lesson.json and
every run's results.json) gzip-compressed in benchmarks/results/raw/lessons/<lesson>.json.gz, so the table can
be rebuilt and rechecked (`--from-raw`) without running anything.

    .venv/bin/python benchmarks/lessons.py [--scale small|medium] [--repeat 3] [--lessons NAME ...]
    .venv/bin/python benchmarks/lessons.py --from-results reports/lessons-<time>   # a finished run, table only
    .venv/bin/python benchmarks/lessons.py --from-raw                              # the kept raw results
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

from benchmarks.markdown import results_head  # noqa: E402
from loadtests.analysis.lesson_runs import LESSON_RESULTS  # noqa: E402
from loadtests.config import lesson as lesson_mod  # noqa: E402
from loadtests.report.lesson import lessons_table  # noqa: E402
from loadtests.results import RESULTS_FILE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "lessons.md"
RAW = ROOT / "benchmarks" / "results" / "raw" / "lessons"


def keep_raw(folder: Path, name: str, command: str) -> Path:
    """One lesson's lesson.json and every run's results.json, in one compressed file."""
    runs = {str(path.parent.relative_to(folder)): json.loads(path.read_text())
            for path in sorted(folder.rglob(RESULTS_FILE))}
    raw = {"lesson": name, "command": command, "lesson_json": json.loads((folder / LESSON_RESULTS).read_text()),
           "runs": runs}
    RAW.mkdir(parents=True, exist_ok=True)
    path = RAW / f"{name}.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw, separators=(",", ":")).encode()))
    return path


def lesson_folders_from_raw() -> tuple[list[Path], str, tempfile.TemporaryDirectory[str]]:
    """The kept lesson.json files, unpacked into lesson folders lessons_table reads, and the commands that
    recorded them (one per run of this script, where a lesson was rerun on its own)."""
    tmp = tempfile.TemporaryDirectory(prefix="lessons-raw-")
    folders, commands = [], []
    for path in sorted(RAW.glob("*.json.gz")):
        raw = json.loads(gzip.decompress(path.read_bytes()))
        folder = Path(tmp.name) / raw["lesson"]
        folder.mkdir()
        (folder / LESSON_RESULTS).write_text(json.dumps(raw["lesson_json"]))
        folders.append(folder)
        commands.append(raw["command"])
    return folders, "; ".join(dict.fromkeys(commands)), tmp


def write_table(folders: list[Path], command: str, minutes: float | None) -> None:
    versions = ""
    if folders:
        first = json.loads((folders[0] / LESSON_RESULTS).read_text())
        versions = f"Kubernetes {first['kube_version']}; "
    took = f" The run took {minutes:.0f} min." if minutes is not None else ""
    head = results_head("Lessons of the field reports, each variant repeated",
                        f"{versions}each run on a fresh control plane; the verdicts weigh the runs' own spread.{took}",
                        command, ["lesson", "verdict", "deciding figure", "warned (sweep: last step)",
                                         "against", "effect", "why"])
    table = lessons_table(folders).splitlines()[2:]
    headlines = []
    for folder in folders:
        data = json.loads((folder / LESSON_RESULTS).read_text())
        headlines.append(f"- `{data['lesson']}` ({data['scale']}): {data['verdict']}: {data['headline']}")
        for growth in data.get("growths") or []:
            if growth.get("shape"):
                headlines.append(f"  - {growth['measure']}: {growth['shape']}"
                                 + (f"; {growth['magnitude']}" if growth.get("magnitude") else ""))
    RESULTS.write_text("\n".join([*head, *table, "", "Each lesson's headline (its lesson.json):", "", *headlines])
                       + "\n\nRaw results (every lesson.json and results.json): benchmarks/results/raw/lessons/.\n")
    print(f"written: {RESULTS}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=lesson_mod.SCALES, default="small")
    parser.add_argument("--repeat", type=int, default=lesson_mod.DEFAULT_REPEAT)
    parser.add_argument("--lessons", nargs="+", default=["all"])
    parser.add_argument("--from-results", type=Path, help="a finished `loadtest lesson` folder: table only")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept raw results")
    args = parser.parse_args()
    if args.from_raw:
        folders, command, tmp = lesson_folders_from_raw()
        with tmp:
            write_table(folders, command, None)
        return 0
    names = lesson_mod.names() if args.lessons == ["all"] else args.lessons
    command = shlex.join([".venv/bin/loadtest", "lesson", *args.lessons, "--scale", args.scale,
                          "--repeat", str(args.repeat)])
    minutes = None
    out = args.from_results
    if out is None:
        out = ROOT / "reports" / f"lessons-benchmark-{time.strftime('%Y%m%d-%H%M%S')}"
        loadtest = Path(sys.executable).with_name("loadtest")
        started = time.monotonic()
        run = [str(loadtest), "lesson", *args.lessons, "--scale", args.scale, "--repeat", str(args.repeat),
               "--out", str(out)]
        print("$ " + shlex.join(run), flush=True)
        code = subprocess.run(run, check=False).returncode
        minutes = (time.monotonic() - started) / 60
        if code != 0:
            print(f"loadtest lesson exited with code {code}; recording the lessons that finished", flush=True)
    folders = [out] if len(names) == 1 else [out / name for name in names]
    folders = [f for f in folders if (f / LESSON_RESULTS).is_file()]
    took = f" ({minutes:.0f} min)" if minutes is not None else ""
    for folder in folders:
        print(f"raw: {keep_raw(folder, folder.name if len(names) > 1 else names[0], command + took)}")
    if args.lessons != ["all"]:  # the table keeps every lesson: the others from their kept raw results
        folders, command, tmp = lesson_folders_from_raw()
        with tmp:
            write_table(folders, command, None)
        return 0
    write_table(folders, command, minutes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
