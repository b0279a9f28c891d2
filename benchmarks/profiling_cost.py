"""What profiling costs: the same step run with pprof profiling off and on, alternating, side by side.

Each run is `loadtest run` of one step (the default plan's load at N nodes) on a fresh control plane; "on" is the
plan's `profiles: {enabled: true}` (kube-apiserver with --profiling, etcd with --enable-pprof, a CPU profile of each
over the window and a heap profile of each at its close), "off" is `enabled: false` (neither flag, nothing asked).
The pairs alternate their order (off-on, on-off, ...), so a steady drift of the machine falls on both sides; a pair
starts once the machine's load average is below QUIET_LOAD (waiting up to 15 minutes).

Per run: kube-apiserver's and etcd's CPU (psutil over the measured window), the client-side p50 and p99 of pod
creates (Locust) and the watch delay p50 (a write to its event at a watcher). The cost is read from the pairs'
on − off differences, tested against zero with the exact Wilcoxon signed-rank test (6 pairs are the fewest that
can reach p < 0.05). The "on" runs' own profiles say what the profiler's own work ("the profiler itself": the
writer that encodes a CPU profile, the CPU profile's buffers) was of kube-apiserver's CPU samples and of each
component's heap in use; "other processes" (the machine's CPU no component covers) shows where something else shared
the machine, which makes a pair's difference the machine's. Each run's results.json is kept gzip-compressed in
benchmarks/results/raw/profiling_cost/.

    .venv/bin/python benchmarks/profiling_cost.py [--nodes 200] [--pairs 6] [--duration-s 40] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.pairs import second_first, test_line  # noqa: E402
from benchmarks.plan_runs import default_load_plan, run_loadtest  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.analysis import profiles  # noqa: E402
from loadtests.polling import poll_until  # noqa: E402
from loadtests.results import StepResult  # noqa: E402

EFFECT = "profiling changes it"  # what a pair test says when the pairs differ from zero

RAW = "profiling_cost"  # under benchmarks/results/raw/
PROFILER = "the profiler itself"
Row = dict[str, float | bool | None]


def _cpu(step: StepResult, component: str) -> float | None:
    return next((p.cpu_percent for p in step.processes if p.component == component), None)


def _client_ms(step: StepResult, name: str, field: str) -> float | None:
    return next((getattr(c, field) for c in step.client if c.name == name), None)


def _profiler_share(step: StepResult, component: str, kind: str) -> float | None:
    """The profiler's own share of a profile (0 where none of its samples were the profiler's); None: no profile."""
    found = profiles.find(step.profiles, component, kind)
    return None if found is None else next((g.flat_pct for g in found.groups if g.group == PROFILER), 0.0)


def row_of(step: StepResult, profiling: bool) -> Row:
    cpu = profiles.find(step.profiles, profiles.APISERVER, "cpu")
    machine = step.machine_cpu_percent
    return {"profiling": profiling, "apiserver": _cpu(step, "kube-apiserver"), "etcd": _cpu(step, "etcd"),
            "post_p50_ms": _client_ms(step, "POST pods", "p50_ms"),
            "post_p99_ms": _client_ms(step, "POST pods", "p99_ms"),
            "watch_p50_ms": None if step.watch_delay.p50 is None else 1000 * step.watch_delay.p50,
            "machine": machine, "profiled": float(len(step.profiles)),
            "other": None if machine is None else machine - sum(p.cpu_percent for p in step.processes),
            "profiler_share": _profiler_share(step, profiles.APISERVER, "cpu"),
            "heap_share_apiserver": _profiler_share(step, profiles.APISERVER, "heap"),
            "heap_share_etcd": _profiler_share(step, profiles.ETCD, "heap"),
            "profiled_cpu": profiles.cpu_percent(cpu) if cpu is not None else None}


def run_once(folder: Path, nodes: int, duration_s: float, profiling: bool, index: int) -> Row:
    out = folder / f"run-{index}-{'on' if profiling else 'off'}"
    plan = default_load_plan(folder, f"profiling-{'on' if profiling else 'off'}", nodes, duration_s,
                             profiles={"enabled": profiling})
    found = run_loadtest(["run", "--plan", str(plan), "--no-gate"], out)
    if found.exit_code != 0:
        raise SystemExit(f"run {index} exited {found.exit_code}: see {out}")
    keep_raw(f"{RAW}/{out.name}.results.json.gz", (out / results.RESULTS_FILE).read_bytes())
    return row_of(found.results.steps[0], profiling)


def _fmt(value: float | bool | None, unit: str = "") -> str:
    return "not measured" if value is None else f"{value:.1f}{unit}"


BUSY_OTHER = 20.0  # % of a core: a run where other processes used more shared the machine with something else


def shared(row: Row) -> bool:
    return row["other"] is not None and float(row["other"]) > BUSY_OTHER  # type: ignore[arg-type]


def pairs_of(rows: list[Row], quiet: bool = True) -> list[tuple[Row, Row]]:
    """(off, on) of each pair, the runs that ran side by side; quiet: only pairs where neither run shared the
    machine with other processes (their difference would be the machine's)."""
    pairs = [(a, b) if not a["profiling"] else (b, a) for a, b in zip(rows[0::2], rows[1::2], strict=True)]
    return [(off, on) for off, on in pairs if not quiet or not (shared(off) or shared(on))]


def paired(rows: list[Row], key: str, relative: bool = False) -> list[float]:
    """on − off of each pair where both were measured (relative: in % of off)."""
    found = []
    for off, on in pairs_of(rows):
        if on[key] is not None and off[key] is not None:
            a, b = float(off[key]), float(on[key])  # type: ignore[arg-type]
            found.append(100 * (b - a) / a if relative else b - a)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--duration-s", type=float, default=40.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "profiling_cost.md")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept runs, run nothing")
    args = parser.parse_args()
    rows = read_raw() if args.from_raw else measure(args.nodes, args.pairs, args.duration_s)
    write(rows, args)
    return 0


def read_raw() -> list[Row]:
    """The rows of the kept runs, in the order they ran."""
    paths = sorted((RAW_DIR / RAW).glob("run-*.results.json.gz"), key=lambda p: int(p.name.split("-")[1]))
    return [row_of(results.from_dict(json.loads(gzip.decompress(path.read_bytes()))).steps[0],
                   path.name.split("-")[2].startswith("on")) for path in paths]


QUIET_LOAD = 1.5  # the 1-minute load average below which a pair starts (2 cores)
QUIET_WAIT_S = 900.0


def quiet_machine() -> bool:
    """Wait (at most QUIET_WAIT_S) until nothing else keeps the machine busy: a pair side by side on a machine
    something else loads measures that, not profiling."""
    if os.getloadavg()[0] < QUIET_LOAD:
        return True
    print(f"waiting for the machine's load ({os.getloadavg()[0]:.1f}) to fall below {QUIET_LOAD}", flush=True)
    return poll_until(lambda: os.getloadavg()[0] < QUIET_LOAD, QUIET_WAIT_S, interval_s=15.0)


def measure(nodes: int, pairs: int, duration_s: float) -> list[Row]:
    for old in (RAW_DIR / RAW).glob("*.results.json.gz"):  # an earlier measurement's runs
        old.unlink()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="profiling-cost-") as tmp:
        for index in range(2 * pairs):
            profiling = second_first(index)  # off-on, then on-off: a steady drift cancels
            if index % 2 == 0 and not quiet_machine():
                print(f"the machine is still busy (load {os.getloadavg()[0]:.1f}): the pair runs anyway, and is "
                      "left out if other processes shared its runs", flush=True)
            row = run_once(Path(tmp), nodes, duration_s, profiling, index)
            rows.append(row)
            print(f"run {index + 1}: profiling {'on ' if profiling else 'off'}: kube-apiserver "
                  f"{_fmt(row['apiserver'], ' %')} of a core, POST pods p50 {_fmt(row['post_p50_ms'], ' ms')}",
                  flush=True)
    return rows


def write(rows: list[Row], args: argparse.Namespace) -> None:
    lines = results_head(
        f"Profiling cost: kube-apiserver and etcd with pprof profiling off and on, {args.nodes:,} nodes",
        f"the default plan's load, one {args.duration_s:.0f} s step per run, pairs alternating off-on and on-off.",
        f".venv/bin/python benchmarks/profiling_cost.py --nodes {args.nodes} --pairs {args.pairs} "
        f"--duration-s {args.duration_s:g}",
        ["run", "profiling", "kube-apiserver CPU", "etcd CPU", "POST pods p50", "POST pods p99", "watch delay p50",
         "machine CPU", "other processes", "profiles kept", "apiserver CPU in its profile",
         "the profiler's share: apiserver CPU, apiserver heap, etcd heap"])
    for index, row in enumerate(rows, 1):
        lines.append(f"| {index} | {'on' if row['profiling'] else 'off'} | {_fmt(row['apiserver'], ' %')} | "
                     f"{_fmt(row['etcd'], ' %')} | {_fmt(row['post_p50_ms'], ' ms')} | "
                     f"{_fmt(row['post_p99_ms'], ' ms')} | {_fmt(row['watch_p50_ms'], ' ms')} | "
                     f"{_fmt(row['machine'], ' %')} | {_fmt(row['other'], ' %')} | {row['profiled']:.0f} | "
                     f"{_fmt(row['profiled_cpu'], ' %')} | {_fmt(row['profiler_share'], ' %')}, "
                     f"{_fmt(row['heap_share_apiserver'], ' %')}, {_fmt(row['heap_share_etcd'], ' %')} |")
    quiet = pairs_of(rows)  # what the figures below rest on
    on = [on_ for _, on_ in quiet]
    off = [off_ for off_, _ in quiet]

    def median(side: list[Row], key: str) -> float:
        return statistics.median(float(r[key]) for r in side if r[key] is not None)  # type: ignore[arg-type]

    share = paired(rows, "apiserver", relative=True)
    others = [float(r["other"]) for r in rows if r["other"] is not None]  # type: ignore[arg-type]
    drift = [float(r["apiserver"]) for r in off if r["apiserver"] is not None]  # type: ignore[arg-type]
    lines += ["",
              f"Over the {len(quiet)} pairs where nothing else shared the machine: median kube-apiserver CPU with "
              f"profiling on / off: {median(on, 'apiserver'):.1f} % vs "
              f"{median(off, 'apiserver'):.1f} % of a core; etcd {median(on, 'etcd'):.1f} % vs "
              f"{median(off, 'etcd'):.1f} %; POST pods p50 {median(on, 'post_p50_ms'):.1f} vs "
              f"{median(off, 'post_p50_ms'):.1f} ms.",
              f"Per pair, kube-apiserver's CPU changed by {min(share):+.1f} % to {max(share):+.1f} % of itself "
              f"(median {statistics.median(share):+.1f} %); the \"off\" runs ranged {min(drift):.1f}-"
              f"{max(drift):.1f} % of a core across the benchmark (the machine's drift).",
              test_line(paired(rows, "apiserver"), "kube-apiserver CPU", "points of a core", EFFECT),
              test_line(paired(rows, "etcd"), "etcd CPU", "points of a core", EFFECT),
              test_line(paired(rows, "post_p50_ms"), "POST pods p50 (client side)", "ms", EFFECT),
              test_line(paired(rows, "watch_p50_ms"), "watch delay p50", "ms", EFFECT),
              f"In the \"on\" runs' own profiles (medians) the profiler's own work was "
              f"{median(on, 'profiler_share'):.1f} % of kube-apiserver's CPU samples (its signal handler is in no "
              f"sample: each sample is the stack it interrupted), and its buffers "
              f"{median(on, 'heap_share_apiserver'):.1f} % of kube-apiserver's heap in use and "
              f"{median(on, 'heap_share_etcd'):.1f} % of etcd's.",
              f"Other processes (the machine's CPU no component covers) were at most {max(others):.1f} % of a core "
              f"in a run, median {statistics.median(others):.1f} %; the pairs and tests above leave out "
              f"{len(pairs_of(rows, quiet=False)) - len(pairs_of(rows))} pair(s) where other processes used more than "
              f"{BUSY_OTHER:.0f} % of a core in either run.",
              "CPU: psutil over the measured window, 100 % = one core; latencies: Locust (client side) and the watch "
              "delay probe; \"apiserver CPU in its profile\": the CPU profile's samples over its seconds.",
              "", f"Raw results (each run's results.json): benchmarks/results/raw/{RAW}/."]
    write_results(args.out, lines)


if __name__ == "__main__":
    sys.exit(main())
