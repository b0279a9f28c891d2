"""The harness's own CPU through a plan's steps, and where it goes: every thread of the `loadtest run` process.

Runs `loadtest run` of a plan (the default plan unless --plan) from each named checkout (`--checkout
before=/path/to/old/worktree --checkout after=.`), alternating their order round after round, on fresh control
planes one after another. While a run runs, every thread's CPU time of the harness process is read each second
(/proc/PID/task/TID/stat) and the threads are named from py-spy's dumps every 5 s (py-spy 0.4, installed in a venv
of its own: `--py-spy PATH`); py-spy also records the last step's window (the thread holding the GIL, 100 samples a
second, per thread), the profile summarised below the table.

Per step: the harness's CPU as the run's own results say it (psutil over the measured window), the same from the
threads' counters with each thread's share, beside the load generator's, kube-apiserver's and the machine's
(the bound: 100 % per core). Every run's results.json, thread counters, names and profile are kept gzip-compressed
in benchmarks/results/raw/harness_cost/; `--from-raw` rebuilds the table from them.

    .venv/bin/python benchmarks/harness_cost.py --checkout before=../old --checkout after=. [--rounds 1]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.config import plan as plan_mod  # noqa: E402
from loadtests.results import RunResult, StepResult  # noqa: E402

RAW = "harness_cost"
# The harness's garbage collections, timed from outside its code: the run is started through this wrapper, which
# records each collection (end time, generation, seconds) with gc.callbacks and writes them as the process exits.
GC_RECORDER = """
import atexit, gc, json, runpy, sys, threading, time
began, found = {}, []
def timed(phase, info):
    if phase == "start":
        began[threading.get_ident()] = time.perf_counter()
    elif threading.get_ident() in began:
        found.append((time.time(), info["generation"], time.perf_counter() - began.pop(threading.get_ident())))
gc.callbacks.append(timed)
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(found)))
sys.argv[0] = "loadtest"
runpy.run_module("loadtests.cli.main", run_name="__main__")
"""
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
THREAD_LINE = re.compile(r'Thread (\d+) \((\w+)\): "([^"]*)"')


@dataclass
class Measured:
    """One run of one checkout: its results, each thread's CPU ticks over time, the threads' names, the profile."""

    label: str
    results: RunResult
    # (wall-clock time, thread id, utime+stime ticks so far, times it blocked so far: its wakeups; -1 unread)
    ticks: list[tuple[float, str, int, int]]
    names: dict[str, str]  # thread id -> its Python name
    profile: str  # py-spy's raw record of the last window ("" without py-spy)
    # each garbage collection of the harness: (epoch seconds it ended, generation, seconds it took, as wall time)
    collections: list[tuple[float, int, float]] = field(default_factory=list)


def _thread_ticks(pid: int) -> list[tuple[str, int, int]]:
    """Each thread's CPU ticks and voluntary context switches (each one a sleep the thread woke from: a wakeup
    costs far more than its own work once its caches went cold, so they say where the harness's CPU goes)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended between listing and reading
        switches = next((int(line.split()[1]) for line in status.splitlines()
                         if line.startswith("voluntary_ctxt_switches:")), -1)
        found.append((task.name, int(fields[11]) + int(fields[12]), switches))
    return found


def _names(py_spy: str | None, pid: int) -> dict[str, str]:
    if not py_spy:
        return {}
    dump = subprocess.run([py_spy, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True, text=True,
                          check=False).stdout
    return {found.group(1): found.group(3) for found in THREAD_LINE.finditer(dump)}


def _record_last_window(py_spy: str, pid: int, out: Path, duration_s: float, steps: int) -> subprocess.Popen[str]:
    """py-spy on the last step's window, started by a shell that waits for the window's marker file."""
    marker = out / f"step-{steps}" / "window-open"
    script = (f"while [ ! -e {marker} ]; do kill -0 {pid} 2>/dev/null || exit 0; sleep 0.25; done; "
              f"exec {py_spy} record --pid {pid} --duration {int(duration_s)} --rate 100 --gil --threads "
              f"-f raw -o {out / 'profile.raw'} --nonblocking")
    return subprocess.Popen(["sh", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


def run_checkout(label: str, checkout: Path, plan: str, folder: Path, py_spy: str | None) -> Measured:
    """`loadtest run` of the plan from that checkout, its threads read each second while it runs."""
    out = folder / f"{label}-{time.strftime('%H%M%S')}"
    collected = folder / f"{out.name}-gc.json"
    command = [sys.executable, "-c", GC_RECORDER, str(collected), "run", "--plan", plan, "--no-gate", "--out",
               str(out)]
    print(f"$ (cd {checkout}; PYTHONPATH=.) {' '.join(command)}", flush=True)
    proc = subprocess.Popen(command, cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)})
    last = plan_mod.load(plan).steps
    recorder = _record_last_window(py_spy, proc.pid, out, last[-1].duration_s, len(last)) if py_spy else None
    ticks: list[tuple[float, str, int, int]] = []
    names: dict[str, str] = {}
    rounds = 0
    while proc.poll() is None:
        now = time.time()
        ticks += [(now, tid, value, wakes) for tid, value, wakes in _thread_ticks(proc.pid)]
        if rounds % 5 == 0:
            names.update(_names(py_spy, proc.pid))
        rounds += 1
        time.sleep(1.0)
    if recorder is not None:
        recorder.wait(timeout=120)
    profile = out / "profile.raw"
    gc_found = [tuple(c) for c in json.loads(collected.read_text())] if collected.exists() else []
    return Measured(label, results.load(out), ticks, names, profile.read_text() if profile.exists() else "",
                    gc_found)


def _epoch(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp).timestamp()


def _thread_counts(run: Measured, step: StepResult, column: int) -> tuple[collections.Counter[str], float]:
    """Each thread's increase of one counter of the ticks (2: CPU ticks, 3: wakeups) over the step's window,
    threads of one name summed, and the window's length in seconds."""
    if not step.window:
        return collections.Counter(), 0.0
    opened, closed = _epoch(step.window["opened_at"]), _epoch(step.window["closed_at"])
    series: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
    for tick in run.ticks:
        if len(tick) > column and tick[column] >= 0:  # runs kept before wakeups were read have none
            series[tick[1]].append((tick[0], tick[column]))

    def at(points: list[tuple[float, int]], moment: float) -> int:
        return max((value for when, value in points if when <= moment), default=0)

    found: collections.Counter[str] = collections.Counter()
    for tid, points in series.items():
        found[run.names.get(tid, f"thread {tid}")] += at(points, closed) - at(points, opened)
    return found, closed - opened


def window_collections(run: Measured, step: StepResult) -> str:
    """The harness's garbage collections inside the step's window: how many, their time (% of one core, as wall
    time: a collection holds the GIL) and the longest, which stalled every thread of the harness that long."""
    if not step.window or not run.collections:
        return "not measured"
    opened, closed = _epoch(step.window["opened_at"]), _epoch(step.window["closed_at"])
    inside = [(generation, took) for ended, generation, took in run.collections if opened <= ended <= closed]
    if not inside:
        return "none"
    full = sum(1 for generation, _ in inside if generation == 2)
    total = sum(took for _, took in inside)
    return (f"{len(inside)} ({full} full), {100 * total / (closed - opened):.2f} %, "
            f"longest {1000 * max(took for _, took in inside):.0f} ms")


def thread_cpu(run: Measured, step: StepResult) -> dict[str, float]:
    """Each thread's CPU over the step's window, in % of one core, threads of one name summed."""
    found, seconds = _thread_counts(run, step, 2)
    return {name: 100.0 * ticks / TICKS_PER_S / seconds for name, ticks in found.most_common() if ticks}


def thread_wakeups(run: Measured, step: StepResult) -> dict[str, float]:
    """Each thread's wakeups per second over the step's window (None-free: threads never read are left out)."""
    found, seconds = _thread_counts(run, step, 3)
    return {name: count / seconds for name, count in found.items() if count}


def _cpu(step: StepResult, component: str) -> float | None:
    return next((p.cpu_percent for p in step.processes if p.component == component), None)


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f} %"


def rows(runs: list[Measured]) -> list[str]:
    lines = []
    for run in runs:
        for step in run.results.steps:
            threads, wakeups = thread_cpu(run, step), thread_wakeups(run, step)
            top = "; ".join(f"{name} {share:.2f}" + (f" ({wakeups[name]:.0f}/s)" if name in wakeups else "")
                            for name, share in list(threads.items())[:6])
            lines.append(f"| {run.label} | {step.nodes:,} | {_pct(_cpu(step, 'harness'))} | "
                         f"{sum(threads.values()):.1f} % | {top} | {window_collections(run, step)} | "
                         f"{_pct(_cpu(step, 'loadgen'))} | "
                         f"{_pct(_cpu(step, 'kube-apiserver'))} | {_pct(step.machine_cpu_percent)} of "
                         f"{100 * (os.cpu_count() or 1)} % |")
    return lines


def last_step_line(runs: list[Measured]) -> list[str]:
    """The harness's CPU at the plan's last step, per checkout: the figure the default plan's budget is about."""
    found = []
    for run in runs:
        step = run.results.steps[-1]
        found.append(f"{run.label} {_pct(_cpu(step, 'harness'))}")
    nodes = runs[0].results.steps[-1].nodes if runs else 0
    return [f"The harness at the last step ({nodes:,} nodes): " + ", ".join(found) + " of one core."]


def profile_summary(run: Measured, window_s: float, top: int = 12) -> list[str]:
    """The last window's profile: where the GIL holder was, by thread and own function, in % of one core."""
    own: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in run.profile.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if len(frames) < 2 or not count.isdigit():
            continue
        thread = frames[0].split(": ", 1)[-1]  # "thread (TID): NAME"
        own[(thread, frames[-1])] += int(count)
    if not own:
        return []
    lines = [f"Profile of {run.label}'s last window (py-spy, the GIL holder, 100 samples a second; % of one core):",
             "", "| thread | function (own) | CPU |", "|---|---|---|"]
    lines += [f"| {thread} | `{function}` | {100 * count / 100 / window_s:.2f} % |"
              for (thread, function), count in own.most_common(top)]
    return lines + [""]


def keep(runs: list[Measured], command: str, raw: str = RAW) -> None:
    for old in (RAW_DIR / raw).glob("*.json.gz"):
        old.unlink()
    for index, run in enumerate(runs, 1):
        keep_raw(f"{raw}/run-{index}.json.gz", {"label": run.label, "results": results.to_dict(run.results),
                                                 "ticks": run.ticks, "names": run.names, "profile": run.profile,
                                                 "collections": run.collections, "command": command})


def read_raw(raw: str = RAW) -> tuple[list[Measured], str]:
    """The kept runs, and the command that measured them."""
    found, command = [], ""
    for path in sorted((RAW_DIR / raw).glob("run-*.json.gz"), key=lambda p: int(p.name.split("-")[1].split(".")[0])):
        data = json.loads(gzip.decompress(path.read_bytes()))
        command = data.get("command", command)
        found.append(Measured(data["label"], results.from_dict(data["results"]),
                              [tuple(t) for t in data["ticks"]], data["names"], data["profile"],
                              [tuple(c) for c in data.get("collections", [])]))
    if not found:
        raise SystemExit(f"{RAW_DIR / raw}: no kept runs; run the benchmark without --from-raw first")
    return found, command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", action="append", default=[], metavar="LABEL=PATH",
                        help="a checkout to run the harness from (repeatable); default: this one, as 'now'")
    parser.add_argument("--plan", default="default")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--py-spy", default=None, help="py-spy to name threads and profile the last window")
    parser.add_argument("--from-raw", action="store_true")
    parser.add_argument("--raw", default=RAW, help="the folder under benchmarks/results/raw/ the runs are kept in")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "harness_cost.md")
    args = parser.parse_args()
    command = ".venv/bin/python " + " ".join(sys.argv)
    if args.from_raw:
        runs, command = read_raw(args.raw)
    else:
        checkouts = [tuple(c.split("=", 1)) for c in args.checkout] or [("now", ".")]
        runs = []
        with tempfile.TemporaryDirectory(prefix="harness-cost-") as tmp:
            for round_index in range(args.rounds):
                order = checkouts if round_index % 2 == 0 else checkouts[::-1]
                runs += [run_checkout(label, Path(path).resolve(), args.plan, Path(tmp), args.py_spy)
                         for label, path in order]
        keep(runs, command, args.raw)
    window_s = plan_mod.load(args.plan).steps[-1].duration_s
    lines = results_head("The harness's own CPU, per step and per thread",
                         f"plan {args.plan}; CPU in % of one core over each step's measured window",
                         command, ["checkout", "nodes", "harness (results)", "harness (threads)",
                                   "threads (top 6, % of one core, wakeups a second)",
                                   "garbage collections in the window", "load generator",
                                   "kube-apiserver", "machine"])
    lines += rows(runs) + ["", *last_step_line(runs), ""]
    for run in runs:
        lines += profile_summary(run, window_s)
    lines.append(f"Raw runs (results.json, thread counters and names, profiles, garbage collections): "
                 f"benchmarks/results/raw/{args.raw}/. "
                 "The machine's column covers every process of the machine: other work ran beside some windows.")
    write_results(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
