"""What one `loadtest worker` sustains against a local control plane, and what two do: side by side in one go.

A local control plane (no kwok of its own) is treated as an existing cluster, as a staging cluster would be.
The same one-step plan runs twice, `loadtest run --master-bind 127.0.0.1:PORT --expect-workers W` with W = 1
then 2 `loadtest worker` processes (connecting from 127.0.0.2, 127.0.0.3). It asks for more than a worker
can do: LIST pollers at --rate per second and --watchers kubelet-like watches. Per run: the requests/s and
watches achieved, each worker's CPU (as it reported it, and by psutil), the CPU of kube-apiserver and etcd
and of the whole machine over the measured window, and which of them was the limit.

    .venv/bin/python benchmarks/remote_workers.py [--nodes 100] [--duration-s 20] [--rate 400] [--watchers 400]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.analysis.scrapes import step_folder  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.controlplane.processes import free_ports  # noqa: E402
from loadtests.results.loadgen import WorkerStat  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LOADTEST = [sys.executable, "-m", "loadtests.cli.main"]
CONTEXT = "loadtest"  # the context of the kubeconfig a local control plane writes
WORKER_ADDRESSES = ("127.0.0.2", "127.0.0.3")
BOUND_PCT = 90.0  # a process at this share of a core (or the machine at this share of all) is the limit


def write_plan(folder: Path, kubeconfig: str, nodes: int, duration_s: float, rate: float, watchers: int) -> Path:
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump({
        "name": "remote-workers-bench",
        "target": {"kind": "cluster", "kubeconfig": kubeconfig},
        "steps": [{"nodes": nodes, "pods_per_node": 1, "warmup_s": 5, "duration_s": duration_s}],
        "load": {"scenarios": {
            "list_pollers": {"rate": rate, "users": max(1, int(rate // 10)), "resource": "pods",
                             "namespace": "loadtest-fleet", "limit": 50},
            "kubelet_watchers": {"per_node": watchers / nodes, "max_watchers": watchers},
        }},
    }))
    return path


def family(pid: int) -> list[psutil.Process]:
    """A process and all its descendants (a worker and its Locust process; the run with its master and kwok)."""
    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


@dataclass
class WindowCpu:
    """CPU of named process groups between the step's window opening and closing (files the run writes)."""

    step_dir: Path
    groups: dict[str, list[psutil.Process]] = field(default_factory=dict)
    percent: dict[str, float] = field(default_factory=dict)  # 100 = one core; "machine": of all cores

    def watch(self, resolve: dict[str, int | list[int]], stop: threading.Event) -> None:
        opened, closed = self.step_dir / "window-open", self.step_dir / "window-closed"
        while not opened.exists():
            if stop.wait(0.05):
                return
        self.groups = {name: [p for pid in (pids if isinstance(pids, list) else [pids]) for p in family(pid)]
                       for name, pids in resolve.items()}
        start = {name: cpu_s(procs) for name, procs in self.groups.items()}
        machine = psutil.cpu_times()
        began = time.monotonic()
        while not closed.exists():
            if stop.wait(0.05):
                return
        elapsed = time.monotonic() - began
        for name, procs in self.groups.items():
            self.percent[name] = 100.0 * (cpu_s(procs) - start[name]) / elapsed
        now = psutil.cpu_times()
        busy = (sum(now) - now.idle - now.iowait) - (sum(machine) - machine.idle - machine.iowait)
        self.percent["machine"] = 100.0 * busy / elapsed / (os.cpu_count() or 1)


@dataclass
class Row:
    """One run: how many workers, its step's results, the window's CPU per process group."""

    workers: int
    step: results.StepResult
    cpu: dict[str, float]

    def worker_cpu(self, worker: WorkerStat) -> str:
        address = worker.worker.split(" ")[0]
        return f"{address} {worker.cpu_percent or 0:.0f} % / {self.cpu.get(f'worker {address}', 0):.0f} %"


RUN_GROUP = "run (runner, Locust master, kwok)"


def run_with_workers(folder: Path, plane: LocalControlPlane, plan: Path, workers: int) -> Row:
    """One `loadtest run` with `workers` `loadtest worker` processes; its step and the window's CPU."""
    kubeconfig = plane.access().kubeconfig
    access = ["--kubeconfig", kubeconfig, "--context", CONTEXT, "--allow-context", CONTEXT]
    master = f"127.0.0.1:{free_ports(1)[0]}"
    out = folder / f"workers-{workers}"
    logs = folder / f"worker-logs-{workers}"
    worker_procs = [subprocess.Popen([*LOADTEST, "worker", "--master", master, "--bind", address, *access,
                                      "--connect-timeout", "300", "--idle-timeout", "60", "--log-dir",
                                      str(logs / address)], cwd=REPO, stdout=subprocess.DEVNULL)
                    for address in WORKER_ADDRESSES[:workers]]
    run = subprocess.Popen([*LOADTEST, "run", "--plan", str(plan), *access, "--master-bind", master,
                            "--expect-workers", str(workers), "--no-gate", "--out", str(out)], cwd=REPO,
                           stdout=subprocess.DEVNULL)
    state = plane.state
    assert state is not None
    components = {p.component: p.pid for p in state.processes}
    window = WindowCpu(step_folder(out, 0))
    stop = threading.Event()
    watcher = threading.Thread(target=window.watch, daemon=True, args=({
        "kube-apiserver": components["kube-apiserver"], "etcd": components["etcd"],
        RUN_GROUP: run.pid,
        **{f"worker {address}": proc.pid for address, proc in zip(WORKER_ADDRESSES, worker_procs, strict=False)},
    }, stop))
    watcher.start()
    try:
        if run.wait(timeout=1200) != 0:
            raise SystemExit(f"the run with {workers} worker(s) failed; see {out}")
        for proc in worker_procs:
            proc.wait(timeout=120)
    finally:
        stop.set()
        for proc in [run, *worker_procs]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    watcher.join(timeout=5)
    return Row(workers=workers, step=results.load(out).steps[0], cpu=window.percent)


def limit_of(row: Row) -> str:
    """Which was the limit: a worker at a full core, the control plane, or the machine as a whole."""
    cpu = row.cpu
    workers = [name for name in cpu if name.startswith("worker") and cpu[name] >= BOUND_PCT]
    met = all(r.achieved_per_s >= 0.95 * r.asked_per_s for r in row.step.rates)
    if met:
        return "none: every asked rate was achieved"
    if workers:
        return "the load generator: " + ", ".join(workers) + f" at >= {BOUND_PCT:.0f} % of a core"
    busiest = max((cpu[name] for name in cpu if name.startswith("worker")), default=0.0)
    apiserver = cpu.get("kube-apiserver", 0.0)
    if cpu.get("machine", 0.0) >= BOUND_PCT and others_pct(row) >= apiserver:
        return (f"the machine: other processes took {others_pct(row):.0f} % of a core beside kube-apiserver's "
                f"{apiserver:.0f} %; no worker above {busiest:.0f} % of a core")
    if cpu.get("machine", 0.0) >= BOUND_PCT or apiserver >= BOUND_PCT:
        return (f"the control plane: kube-apiserver at {apiserver:.0f} % of a core, the machine at "
                f"{cpu.get('machine', 0.0):.0f} %; no worker above {busiest:.0f} % of a core")
    return "not CPU: see the step's notes"


def others_pct(row: Row) -> float:
    """CPU the machine spent outside this benchmark's processes (% of a core): others sharing the cores."""
    machine = row.cpu.get("machine", 0.0) * (os.cpu_count() or 1)
    ours = sum(value for name, value in row.cpu.items() if name != "machine")
    return max(0.0, machine - ours)


def cpu_ms_per_request(row: Row) -> float:
    """What the workers spent per request they sent (their own reports over the window)."""
    spent = sum(w.cpu_seconds or 0.0 for w in row.step.workers)
    sent = sum(w.requests for w in row.step.workers)
    return 1000.0 * spent / max(1, sent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=400.0, help="LISTs per second asked")
    parser.add_argument("--watchers", type=int, default=400, help="kubelet-like watches asked")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "remote_workers.md")
    args = parser.parse_args()
    bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
    rows = []
    with tempfile.TemporaryDirectory(prefix="remote-workers-") as tmp:
        folder = Path(tmp)
        plane = LocalControlPlane(LocalOptions(name=f"bench-remote-{os.getpid()}", directory=folder / "cluster",
                                               kwok=False), bins)
        plane.up(log=lambda _m: None)
        try:
            plan = write_plan(folder, plane.access().kubeconfig, args.nodes, args.duration_s, args.rate,
                              args.watchers)
            for workers in (1, 2):
                row = run_with_workers(folder, plane, plan, workers)
                rows.append(row)
                rates = {r.scenario: r.achieved_per_s for r in row.step.rates}
                print(f"{workers} worker(s): {rates.get('list_pollers', 0):.0f} LIST/s, "
                      f"{rates.get('kubelet_watchers', 0):.0f} watches; limit: {limit_of(row)}", flush=True)
        finally:
            plane.down()
    lines = results_head(
        f"Remote workers: what one `loadtest worker` sustains, and two ({args.nodes} nodes)",
        f"a local control plane used as an existing cluster; asked: {args.rate:g} LIST/s (pods, 50 per page) and "
        f"{args.watchers} kubelet-like watches; one {args.duration_s:g} s window per run.",
        f".venv/bin/python benchmarks/remote_workers.py --nodes {args.nodes} --duration-s {args.duration_s:g} "
        f"--rate {args.rate:g} --watchers {args.watchers}",
        ["workers", "LIST/s achieved (asked)", "watches (asked)", "requests/s, all", "each worker's CPU "
         "(reported / psutil)", "worker CPU per request", "run: runner, master, kwok", "kube-apiserver", "etcd",
         "machine", "other processes", "the limit"])
    for row in rows:
        step, cpu = row.step, row.cpu
        rates = {r.scenario: r for r in step.rates}
        lists, watches = rates["list_pollers"], rates["kubelet_watchers"]
        total = sum(c.count for c in step.client if c.type != "WATCH") / max(step.duration_s, 1e-9)
        per_worker = "; ".join(row.worker_cpu(w) for w in step.workers)
        lines.append(f"| {row.workers} | {lists.achieved_per_s:.0f} ({lists.asked_per_s:.0f}) | "
                     f"{watches.achieved_per_s:.0f} ({watches.asked_per_s:.0f}) | {total:.0f} | {per_worker} | "
                     f"{cpu_ms_per_request(row):.2f} ms | "
                     f"{cpu.get(RUN_GROUP, 0):.0f} % | {cpu.get('kube-apiserver', 0):.0f} % | "
                     f"{cpu.get('etcd', 0):.0f} % | {cpu.get('machine', 0):.0f} % of {os.cpu_count()} cores | "
                     f"{others_pct(row):.0f} % | "
                     f"{limit_of(row)} |")
    one = rows[0]
    one_rps = sum(c.count for c in one.step.client if c.type != "WATCH") / max(one.step.duration_s, 1e-9)
    one_watches = next(r.achieved_per_s for r in one.step.rates if r.scenario == "kubelet_watchers")
    one_cpu = max((w.cpu_percent or 0.0) for w in one.step.workers)
    lines += ["", f"One worker sent {one_rps:.0f} requests/s and held {one_watches:.0f} watches at {one_cpu:.0f} % "
                  f"of a core ({cpu_ms_per_request(one):.2f} ms of CPU per request); the limit of each run is in the "
                  "last column.",
              "", "CPU: 100 % = one core, over the measured window (psutil on each process and its children; "
                  "other processes: the machine's busy time beyond this benchmark's processes; a "
                  "worker's reported figure is its own process time between its statistics reports). Rates: "
                  "client side, successes per second of the window; requests/s counts every non-WATCH request."]
    lines += ["", f"Raw rows (each run's step results): benchmarks/results/raw/{args.out.stem}.json.gz."]
    args.out.write_text("\n".join(lines) + "\n")
    keep_raw(f"{args.out.stem}.json.gz", {"command": lines[3], "rows": rows})
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
