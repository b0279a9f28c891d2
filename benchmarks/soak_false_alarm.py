"""How often a steady soak's series are judged to grow: `loadtest soak` of a steady, read-mostly load repeated on
fresh control planes, and the fraction of judged series the rule (analysis/soak.py) calls `grows`, per series and
overall, against the rate docs/soak.md states. With --repeat 1 and --hours 2 it is the recorded long soak: every
series' slope with its interval, the harness's and the load generator's among them.

    .venv/bin/python benchmarks/soak_false_alarm.py [--repeat 3] [--hours 0.05] [--interval-s 5] [--nodes 5]
    .venv/bin/python benchmarks/soak_false_alarm.py --repeat 1 --hours 2 --interval-s 30 --compaction-s 300 \\
        --name soak_recorded                      # the recorded soak of at least 2 hours
    .venv/bin/python benchmarks/soak_false_alarm.py --from-raw [--name NAME] [--settle-s S]   # judged again

The steady load holds no object it does not delete: the fleet's Leases renew, pollers LIST, informers and kubelet
watchers watch. Its etcd compacts every --compaction-s (the apiserver's --etcd-compaction-interval; Kubernetes'
default 300 s), so a short soak sees several compactions and its database a steady state; the first
--warmup-s of each soak (caches filling after a fresh start) are not in its window.

Written: benchmarks/results/<name>.md and benchmarks/results/raw/<name>/soak-<k>.tar.gz (each soak's samples file,
soak.json and results.json).
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, results_head, write_results  # noqa: E402
from loadtests.analysis.soak import ALPHA_ONE_SIDED, GROWS, NOT_MEASURED, SoakJudgement, judge, trend_text  # noqa: E402
from loadtests.results import RESULTS_FILE  # noqa: E402
from loadtests.results.soak import META_FILE, SAMPLES_FILE, SOAK_DIR, load_meta, load_samples  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def steady_plan(folder: Path, nodes: int, warmup_s: float, compaction_s: int) -> Path:
    """A plan of one steady step: reads and watches, nothing kept that is not deleted."""
    plan = {
        "name": "soak-steady",
        "target": {"kind": "local",
                   "component_args": {"kube-apiserver": [f"--etcd-compaction-interval={compaction_s}s"]}},
        "steps": [{"nodes": nodes, "pods_per_node": 2, "warmup_s": warmup_s, "duration_s": 60}],
        "measure": {"profiles": False, "audit": False},
        "load": {"scenarios": {"list_pollers": {"rate": 2, "users": 1, "resource": "pods", "resource_version": "0"},
                               "informers": {"count": 2, "resource": "pods"},
                               "kubelet_watchers": {"per_node": 1}}},
    }
    path = folder / "soak-steady.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def soak_once(plan: Path, out: Path, hours: float, interval_s: float, settle_s: float | None = None,
              environment: dict[str, str] | None = None) -> tuple[int, float]:
    """One `loadtest soak` into `out` (`environment`: variables set for it): its exit code and how long it took."""
    command = [str(Path(sys.executable).with_name("loadtest")), "soak", "--plan", str(plan), "--hours", f"{hours:g}",
               "--interval-s", f"{interval_s:g}", "--out", str(out)]
    command += ["--settle-s", f"{settle_s:g}"] if settle_s is not None else []
    print("$ " + shlex.join(command), flush=True)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, **(environment or {})})
    print("\n".join((done.stdout + done.stderr).splitlines()[-12:]), flush=True)
    return done.returncode, time.monotonic() - started


def keep(out: Path, raw: Path) -> None:
    """The soak's files on disk, as they are, in one compressed archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in (f"{SOAK_DIR}/{SAMPLES_FILE}", f"{SOAK_DIR}/{META_FILE}", RESULTS_FILE):
            if (out / name).is_file():
                archive.add(out / name, arcname=name)
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_bytes(buffer.getvalue())


def unpack(raw: Path, into: Path) -> Path:
    with tarfile.open(raw) as archive:
        archive.extractall(into, filter="data")
    return into


def judged(folder: Path, settle_s: float | None = None) -> SoakJudgement:
    """The soak judged as it was recorded, or from `settle_s` into its window (the same samples judged again)."""
    meta = load_meta(folder)
    if settle_s is not None:
        meta.settle_s = settle_s
    return judge(load_samples(folder), meta)


def tables(found: list[SoakJudgement]) -> list[str]:
    """Per series: how many soaks judged it each way; then every judged series' slope of the last soak."""
    names = list(dict.fromkeys(t.series for j in found for t in j.trends))
    lines = []
    total = judged_count = 0
    for name in names:
        verdicts = Counter(t.verdict for j in found for t in j.trends if t.series == name)
        judged_count += sum(n for v, n in verdicts.items() if v != NOT_MEASURED)
        total += verdicts[GROWS]
        lines.append(f"| {name} | " + " | ".join(str(verdicts[v]) for v in ("grows", "flat", "falls", "inconclusive",
                                                                          NOT_MEASURED)) + " |")
    rate = total / judged_count if judged_count else 0.0
    lines += ["", f"Judged `grows`: {total} of {judged_count} judged series over {len(found)} steady soak(s) = "
              f"{rate:.1%} (the rule's stated rate per steady series: {ALPHA_ONE_SIDED:.1%}).", "",
              "Every series of the last soak (slope per hour, its 95 % interval, growth against its level, time to "
              "its limit):", ""]
    lines += [f"- {trend_text(t)}" for t in found[-1].trends] if found else []
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hours", type=float, default=0.05)
    parser.add_argument("--interval-s", type=float, default=5.0)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--warmup-s", type=float, default=60.0)
    parser.add_argument("--compaction-s", type=int, default=30)
    parser.add_argument("--name", default="soak_false_alarm")
    parser.add_argument("--settle-s", type=float, default=None,
                        help="seconds from each soak's start not judged (default: the soak's own, a tenth of it)")
    parser.add_argument("--environment", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable set for each soak (repeatable; with --from-raw: the one its raw ran with)")
    parser.add_argument("--from-raw", action="store_true")
    args = parser.parse_args()
    raw_dir = RAW_DIR / args.name
    environment = dict(pair.split("=", 1) for pair in args.environment)
    found: list[SoakJudgement] = []
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as tmp:
        if not args.from_raw:
            for old in raw_dir.glob("soak-*.tar.gz"):
                old.unlink()
            plan = steady_plan(Path(tmp), args.nodes, args.warmup_s, args.compaction_s)
            for k in range(1, args.repeat + 1):
                out = Path(tmp) / f"soak-{k}"
                code, took = soak_once(plan, out, args.hours, args.interval_s, args.settle_s, environment)
                print(f"soak {k}: exit {code} in {took:.0f} s", flush=True)
                keep(out, raw_dir / f"soak-{k}.tar.gz")
        for k, raw in enumerate(sorted(raw_dir.glob("soak-*.tar.gz")), 1):
            found.append(judged(unpack(raw, Path(tmp) / f"raw-{k}"), args.settle_s))
    command = shlex.join(["benchmarks/soak_false_alarm.py", *sys.argv[1:]])
    judged_from = (f"from {args.settle_s:g} s" if args.settle_s is not None
                   else "from each soak's own settling time (soak.json; none before it existed)")
    setting = (f"{len(found)} steady soak(s) of {args.hours:g} h at {args.nodes} nodes, sampled every "
               f"{args.interval_s:g} s, etcd compacted every {args.compaction_s} s, {args.warmup_s:g} s warm-up, "
               f"judged {judged_from}" + "".join(f", {name}={value} set" for name, value in environment.items()))
    lines = results_head("Soak: steady series judged to grow", setting, command,
                         ["series", "grows", "flat", "falls", "inconclusive", "not measured"])
    write_results(RESULTS / f"{args.name}.md", lines + tables(found), also=f"; raw: {raw_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
