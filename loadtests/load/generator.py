"""Runs the Locust load of one step as child processes, and reads back what it measured and achieved.

Locust runs as a subprocess (a master plus N workers when distributed), never in the runner's process:
its CPU is then measured by pid, it can use more cores, and importing Locust would monkey-patch the
runner for gevent. The users are allocated exactly (fixed_count per class, --users = their sum).

Usage:
    load = LoadGenerator(StepLoad(plan.load, nodes=step.nodes, duration_s=step.duration_s, out_dir=step_dir),
                         access)
    load.start()
    ... load.pids() for process probes ...
    outcome = load.wait()     # LoadOutcome: ClientStat per request kind, asked vs achieved, notes
    load.stop()               # always (teardown, signal handlers): terminates only what it started
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd

from loadtests.config.scenarios import achieved_rates, needs_node_identities, scenario_params, user_plan
from loadtests.controlplane.processes import ended_text, exit_text, free_ports
from loadtests.errors import LoadTestError, disk_full
from loadtests.kube.access import ClusterAccess
from loadtests.kube.identity import cluster_identity
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.objects import node_name
from loadtests.kube.private import write_private
from loadtests.load.contract import (
    CONFIG_ENV,
    FINAL_FAILURES_SUFFIX,
    FINAL_STATS_SUFFIX,
    WINDOW_FAILURES_SUFFIX,
    WINDOW_SIGNAL,
    WINDOW_STATS_SUFFIX,
    WINDOW_WORKERS_SUFFIX,
    LoadConfig,
)
from loadtests.load.processes import LOCUSTFILE, locust_env, locust_spawn, locust_worker_command
from loadtests.load.remote import MasterBind
from loadtests.polling import poll_until
from loadtests.results.loadgen import ClientStat, RateResult, WorkerStat
from loadtests.results.processes import CPU_BOUND_PERCENT

CSV_PREFIX = "locust"
WINDOW_FILE = "window-open"
WINDOW_CLOSE_FILE = "window-closed"
WINDOW_CAP_S = 180.0  # time allowed for start-up and spawning before the window opens
STOP_SLACK_S = 60.0  # users end themselves this long after the run time, should Locust not stop them
_CPU_WARNINGS = ("CPU usage above", "exceeded cpu threshold", "CPU usage was too high")
LOCAL_MASTER_WAIT_S = 60.0  # local worker processes connect within seconds
UI_HOST = "127.0.0.1"  # the live view (--ui) is served on loopback only


class LoadGeneratorError(LoadTestError):
    """Locust could not run the load (it crashed, hung, or wrote no statistics)."""


@dataclass
class FailureStat:
    """One distinct failure Locust recorded: which request kind, the message, how often."""

    type: str
    name: str
    error: str
    count: int


@dataclass
class LoadOutcome:
    client: list[ClientStat]
    rates: list[RateResult]
    notes: list[str]
    total: ClientStat | None = None  # Locust's Aggregated row
    failures: list[FailureStat] = field(default_factory=list)  # most frequent first
    users: dict[str, int] = field(default_factory=dict)  # user class -> users run
    log: Path | None = None
    workers: list[WorkerStat] = field(default_factory=list)  # each worker's share, as the master counted it


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _content_bytes(row: dict[str, Any]) -> int | None:
    """All the responses' bytes of a stats row: Locust writes their count and average size."""
    average = _number(row.get("Average Content Size"))
    return None if average is None else round(average * int(row["Request Count"]))


def read_stats_csv(path: Path) -> tuple[list[ClientStat], ClientStat | None]:
    """Locust's <prefix>_stats.csv as ClientStats (times in ms, as Locust reports) and its Aggregated row."""
    frame = pd.read_csv(path, keep_default_na=False, na_values=["N/A", ""], dtype={"Type": str, "Name": str})
    missing = {"Type", "Name", "Request Count", "Failure Count", "Requests/s", "50%", "90%", "99%",
               "Max Response Time", "Average Response Time"} - set(frame.columns)
    if missing:
        raise LoadGeneratorError(f"{path}: not a Locust stats file (no column {sorted(missing)[0]!r})")
    stats: list[ClientStat] = []
    total = None
    for row in frame.to_dict("records"):
        stat = ClientStat(
            type="" if pd.isna(row["Type"]) else str(row["Type"]),
            name=str(row["Name"]),
            count=int(row["Request Count"]),
            failures=int(row["Failure Count"]),
            rps=_number(row["Requests/s"]) or 0.0,
            p50_ms=_number(row["50%"]),
            p90_ms=_number(row["90%"]),
            p99_ms=_number(row["99%"]),
            max_ms=_number(row["Max Response Time"]),
            avg_ms=_number(row["Average Response Time"]),
            content_bytes=_content_bytes(row),
        )
        if stat.name == "Aggregated" and not stat.type:
            total = stat
        else:
            stats.append(stat)
    return stats, total


def read_failures_csv(path: Path) -> list[FailureStat]:
    """Locust's <prefix>_failures.csv, most frequent first (empty when the file is missing or empty)."""
    if not path.exists() or not path.stat().st_size:
        return []
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    failures = [FailureStat(type=row["Method"], name=row["Name"], error=row["Error"], count=int(row["Occurrences"]))
                for row in frame.to_dict("records")]
    return sorted(failures, key=lambda f: -f.count)


def failure_note(total: ClientStat | None, failures: list[FailureStat]) -> list[str]:
    """One line on failed requests: they are load the target refused or could not serve."""
    if total is None or not total.failures:
        return []
    top = "; ".join(f"{f.name}: {f.error} x{f.count}" for f in failures[:3])
    return [f"load: {total.failures} of {total.count} requests failed ({100 * total.failures / total.count:.1f}%)"
            + (f"; most frequent: {top}" if top else "")]


def read_workers(path: Path) -> tuple[list[WorkerStat], list[str], str | None]:
    """The master's per-worker figures (loadtests/load/locust/worker_link.py): the workers, notes on refused and lost
    ones, and why the step could not start, if it could not. Nothing when the file is missing."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return [], [], None
    workers = [WorkerStat(**entry) for entry in data.get("workers") or []]
    notes = [f"load: refused worker {line}" for line in data.get("refused") or []]
    notes += [f"load: worker {w.worker} CPU-bound: {w.cpu_percent:.0f} % of a core over the window; its client-side "
              "figures may be inflated and its rates capped by the load generator; add workers"
              for w in workers if w.cpu_percent is not None and w.cpu_percent >= CPU_BOUND_PERCENT]
    lost = [w for w in workers if w.lost_after_s is not None]
    for worker in lost:
        notes.append(f"load: worker {worker.worker} was lost (disconnected or stopped answering; noticed "
                     f"{worker.lost_after_s:g} s into the window); {worker.requests} of its requests were counted")
    if lost:
        notes.append(f"load: partial figures: the client-side counts and rates lack what {len(lost)} lost "
                     "worker(s) sent after their last report, and the load fell short of the plan from then on")
    return workers, notes, data.get("error")


@dataclass(frozen=True)
class StepLoad:
    """What one step asks of the load, built once by whoever runs the step (the runner, a benchmark, a test)
    and read by the load generator: the plan's scenarios, the step's size and window, where Locust writes,
    and how its processes are laid out."""

    scenarios: dict[str, Any]  # the plan's `load` section (scenario name -> its parameters)
    nodes: int
    duration_s: float  # the measured window (or Locust's whole run time when not windowed)
    out_dir: Path
    windowed: bool = False  # the runner opens and closes the measured window (open_window, close_window)
    run_id: str = ""  # names the harness's objects; a fresh one when empty
    workers: int = 0  # local Locust worker processes (0: one process)
    master: MasterBind | None = None  # workers of other machines join at master.address; then no local ones
    final_step: bool = False  # workers of other machines end after it
    ui_port: int | None = None  # Locust's web UI on UI_HOST:ui_port, read-only (--ui)
    spawn_rate: float | None = None  # users started per second (None: from the user count)
    node_names: tuple[str, ...] | None = None  # the step's nodes, where a scenario needs their names

    def all_node_names(self) -> list[str]:
        """The step's nodes by name, as LoadConfig.node names them: node_names, else the fleet's first `nodes`."""
        return list(self.node_names) if self.node_names is not None else [node_name(i) for i in range(self.nodes)]

    @property
    def run_time_s(self) -> int:
        """Locust's own run time: with a measured window only a cap (the window ends the run)."""
        return max(1, math.ceil(self.duration_s + (WINDOW_CAP_S if self.windowed else 0.0)))


def catches_signal(pid: int, signum: int) -> bool:
    """Whether a process has a handler for the signal (Linux: the SigCgt mask of /proc/<pid>/status)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            mask = next((line.split()[1] for line in status if line.startswith("SigCgt:")), "0")
    except OSError:
        return False
    return bool(int(mask, 16) >> (signum - 1) & 1)


class LoadGenerator:
    """The Locust processes of one step. start() returns at once; wait() blocks until the run time is over."""

    def __init__(self, step: StepLoad, access: ClusterAccess, python: str = sys.executable, *,
                 scenario_access: dict[str, ClusterAccess] | None = None,
                 node_identities: NodeIdentities | None = None) -> None:
        self.step = step
        self.scenarios = scenario_params(step.scenarios)
        self.access = access
        self.scenario_access = dict(scenario_access or {})  # scenarios sent as a tenant of their own
        self.node_identities = node_identities  # local processes only: workers of other machines never get them
        if self.scenario_access and step.master is not None:
            raise LoadGeneratorError("tenants (target.tenants) send from this machine only: workers of other "
                                     "machines have credentials of their own; drop the remote workers or the tenants")
        self.out_dir = Path(step.out_dir).resolve()  # Locust runs with this as its working directory
        self.window_file = self.out_dir / WINDOW_FILE
        self.window_close_file = self.out_dir / WINDOW_CLOSE_FILE
        self._window_opened: float | None = None
        self._window_s: float | None = None  # how long the window was open, once the runner closed it
        self.master = step.master
        self.cluster_uid: str | None = None
        self.run_id = step.run_id or uuid.uuid4().hex[:12]
        self.python = python
        self.users = user_plan(self.scenarios, step.nodes)
        total = self.users.total
        # small counts at once, large ones within ~10 s: at most 200 new connections (TLS handshakes) per second
        self.spawn_rate = step.spawn_rate or max(50.0, min(200.0, total / 5.0))
        self.log_path = self.out_dir / "locust.log"
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []
        self._started_at: float | None = None
        self._config_dir: Path | None = None

    # --- processes ------------------------------------------------------------------------------------

    def _write_config(self) -> Path:
        step, windowed = self.step, self.step.windowed
        config = LoadConfig(access=self.access, scenarios=self.scenarios, nodes=step.nodes,
                            node_names=list(step.node_names) if step.node_names is not None else None,
                            run_id=self.run_id, workers=self.expected_workers(),
                            stop_at=time.time() + step.run_time_s + self.spawn_time_s() + STOP_SLACK_S,
                            window_file=str(self.window_file) if windowed else None,
                            window_s=step.duration_s if windowed else None,
                            window_close_file=str(self.window_close_file) if windowed else None,
                            cluster_uid=self.cluster_uid, remote_workers=self.master.workers if self.master else 0,
                            remote_wait_s=self.master.wait_s if self.master else 0.0, final_step=step.final_step,
                            scenario_access=self.scenario_access, node_identities=self.node_identities)
        # it may hold a bearer token: kept in a private folder outside the results, removed when Locust is done
        self._config_dir = Path(tempfile.mkdtemp(prefix="loadtest-load-"))
        path = self._config_dir / "load-config.json"
        write_private(path, json.dumps(config.to_dict(), indent=1).encode())
        return path

    def expected_workers(self) -> int:
        """Worker processes the master waits for: local ones, or those of other machines."""
        return self.master.workers if self.master else self.step.workers

    def ui_url(self) -> str | None:
        return f"http://{UI_HOST}:{self.step.ui_port}" if self.step.ui_port else None

    def spawn_time_s(self) -> float:
        return self.users.total / self.spawn_rate if self.users.total else 0.0

    def command(self, master_port: int | None = None) -> list[str]:
        """The Locust command line of the master (or of the only process)."""
        # with the live view Locust serves its UI and starts the plan's users by itself, as headless would
        ui_port = self.step.ui_port
        mode = ["--autostart", "--web-host", UI_HOST, "--web-port", str(ui_port)] if ui_port else ["--headless"]
        cmd = [
            self.python, "-m", "locust", "-f", str(LOCUSTFILE), *mode,
            "--users", str(self.users.total), "--spawn-rate", f"{self.spawn_rate:g}",
            "--run-time", f"{self.step.run_time_s}s", "--csv", str(self.out_dir / CSV_PREFIX), "--only-summary",
            "--exit-code-on-error", "0", "--loglevel", "INFO",
        ]
        if master_port is not None:
            host = self.master.host if self.master else "127.0.0.1"
            wait_s = self.master.wait_s if self.master else LOCAL_MASTER_WAIT_S
            cmd += ["--master", "--master-bind-host", host, "--master-bind-port", str(master_port),
                    "--expect-workers", str(self.expected_workers()), "--expect-workers-max-wait", f"{wait_s:g}"]
        return cmd

    def _spawn(self, cmd: list[str], log_path: Path, env: dict[str, str]) -> None:
        log = open(log_path, "wb")  # noqa: SIM115 - closed in _close_logs once the process is gone
        self._logs.append(log)
        self._procs.append(locust_spawn(cmd, log, env, self.out_dir))

    def start(self) -> None:
        """Start Locust (master and workers when distributed); returns once the processes are started."""
        if self._procs:
            raise LoadGeneratorError("this load generator was already started")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._started_at = time.monotonic()
        if not self.users.total:
            return
        if self.master is not None and self.cluster_uid is None:
            self.cluster_uid = cluster_identity(self.access)  # what every worker of another machine must reach
        env = locust_env({CONFIG_ENV: str(self._write_config())})
        for suffix in ("_stats.csv", "_failures.csv", FINAL_STATS_SUFFIX, FINAL_FAILURES_SUFFIX,
                       WINDOW_STATS_SUFFIX, WINDOW_FAILURES_SUFFIX, WINDOW_WORKERS_SUFFIX):
            (self.out_dir / (CSV_PREFIX + suffix)).unlink(missing_ok=True)
        self.window_file.unlink(missing_ok=True)
        self.window_close_file.unlink(missing_ok=True)
        if self.master is not None:  # the workers come from elsewhere, to the same address every step
            self._spawn(self.command(self.master.port), self.log_path, env)
            return
        if self.step.workers <= 0:
            self._spawn(self.command(), self.log_path, env)
            return
        port = free_ports(1)[0]
        self._spawn(self.command(port), self.log_path, env)
        for index in range(self.step.workers):
            worker_cmd = locust_worker_command(self.python, "127.0.0.1", port)
            self._spawn(worker_cmd, self.out_dir / f"locust-worker-{index}.log", env)

    def open_window(self) -> None:
        """Start the measured window now: Locust restarts its statistics."""
        if not self.step.windowed:
            raise LoadGeneratorError("open_window() needs a windowed step")
        self.window_file.touch()
        self._window_opened = time.monotonic()
        self._wake_master()

    def close_window(self) -> None:
        """Close the measured window now: Locust writes its statistics as they stand, then stops its users and
        quits (wait() then returns the window's figures; the stop is in none of them)."""
        if not self.step.windowed:
            raise LoadGeneratorError("close_window() needs a windowed step")
        self.window_close_file.touch()
        self._wake_master()
        if self._window_opened is not None:
            self._window_s = time.monotonic() - self._window_opened

    def _wake_master(self) -> None:
        """WINDOW_SIGNAL to the master (or only) process once it listens for it (until then its default action
        would end it): it sees the window's file now rather than at its next look."""
        master = self._procs[0] if self._procs else None
        if master is not None and master.poll() is None and catches_signal(master.pid, WINDOW_SIGNAL):
            with contextlib.suppress(ProcessLookupError):
                master.send_signal(WINDOW_SIGNAL)

    def wait_spawned(self, timeout: float) -> bool:
        """Block until Locust reports all users spawned (its start-up takes a few seconds), so a measurement
        window can start with the full load. False on timeout or when Locust has already exited."""
        def spawned() -> bool:
            try:
                return not self._procs or "All users spawned" in self.log_path.read_text(errors="replace")
            except OSError:
                return False

        return poll_until(spawned, timeout, interval_s=0.1, abort=lambda: self._procs[0].poll() is not None)

    def log_full(self) -> bool:
        """Whether Locust's log can no longer grow (its filesystem is full): Locust says there that its users
        run, so wait_spawned could never see it."""
        return disk_full(self.log_path.parent) is not None

    def pids(self) -> list[int]:
        """Master and workers (or the single process), for CPU and memory probes."""
        return [proc.pid for proc in self._procs]

    def running(self) -> bool:
        return any(proc.poll() is None for proc in self._procs)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the processes this generator started, by pid: SIGTERM (Locust then stops its users and
        writes its statistics) to the master first, which tells its workers and collects their last figures,
        then to what is left; SIGKILL after timeout_s. Safe to call twice, and from a signal handler (it only
        polls, so it cannot block on a wait() it interrupted)."""
        deadline = time.monotonic() + timeout_s
        for group in (self._procs[:1], self._procs[1:]):
            alive = [proc for proc in group if proc.poll() is None]  # a reaped pid is never signalled again
            for proc in alive:
                self._signal(proc, signal.SIGTERM)
            self._exited(alive, deadline - time.monotonic())
        leftovers = [proc for proc in self._procs if proc.poll() is None]
        for proc in leftovers:
            self._signal(proc, signal.SIGKILL)
        self._exited(leftovers, 5.0)
        self._close_logs()

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    @staticmethod
    def _exited(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> bool:
        return poll_until(lambda: all(proc.poll() is not None for proc in procs), timeout_s, interval_s=0.05)

    def _close_logs(self) -> None:
        if any(proc.poll() is None for proc in self._procs):
            return
        config_dir, self._config_dir = self._config_dir, None
        if config_dir is not None:
            shutil.rmtree(config_dir, ignore_errors=True)
        while True:  # list.pop is atomic: a stop() from another thread cannot close a log twice
            try:
                log = self._logs.pop()
            except IndexError:
                return
            log.close()

    def __enter__(self) -> LoadGenerator:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- results ----------------------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> LoadOutcome:
        """Wait for the run to end (run time + spawning + margin by default) and read its results."""
        if self._started_at is None:
            raise LoadGeneratorError("wait() before start()")
        if not self._procs:
            return LoadOutcome(client=[], rates=achieved_rates(self.scenarios, self.step.nodes,
                                                               self.step.duration_s, []), notes=[], users={})
        run_time_s = self.step.run_time_s
        timeout = timeout if timeout is not None else run_time_s + self.spawn_time_s() + 90.0
        master = self._procs[0]
        try:
            code = master.wait(timeout=max(0.0, self._started_at + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            raise LoadGeneratorError("Locust " + ended_text(
                f"did not finish within {timeout:.0f} s (run time {run_time_s} s) and was stopped", self.log_path)
            ) from None
        for worker in self._procs[1:]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=15)
        self.stop()  # workers that outlived their master
        self._refuse_unstarted()
        if code != 0:
            raise LoadGeneratorError(f"Locust {exit_text(code, self.log_path)}")
        return self.outcome()

    def _refuse_unstarted(self) -> None:
        """A master that gave up on its workers: one line saying how many came, not Locust's log."""
        _, _, error = read_workers(self.out_dir / (CSV_PREFIX + WINDOW_WORKERS_SUFFIX))
        try:
            gave_up = "Gave up waiting for workers to connect" in self.log_path.read_text(errors="replace")
        except OSError:
            gave_up = False
        if self.master is None or not (error or gave_up):
            return
        where = self.master.address
        raise LoadGeneratorError(
            (error or f"waited {self.master.wait_s:g} s for {self.master.workers} worker(s) to connect")
            + f" at {where}; start them with `loadtest worker --master {where} --kubeconfig K --context C "
            "--allow-context C` on their machines")

    def _csv(self, *suffixes: str) -> Path:
        """The first of the locustfile's files that it wrote (window close, then quit: complete), else
        Locust's own (the last suffix; up to 1 s stale)."""
        for suffix in suffixes[:-1]:
            path = self.out_dir / (CSV_PREFIX + suffix)
            if path.exists() and path.stat().st_size:
                return path
        return self.out_dir / (CSV_PREFIX + suffixes[-1])

    def stats_path(self) -> Path:
        return self._csv(WINDOW_STATS_SUFFIX, FINAL_STATS_SUFFIX, "_stats.csv")

    def outcome(self) -> LoadOutcome:
        path = self.stats_path()
        if not path.exists() or not path.stat().st_size:
            raise LoadGeneratorError("Locust " + ended_text(f"wrote no statistics ({path})", self.log_path))
        client, total = read_stats_csv(path)
        failures = read_failures_csv(self._csv(WINDOW_FAILURES_SUFFIX, FINAL_FAILURES_SUFFIX, "_failures.csv"))
        rates = achieved_rates(self.scenarios, self.step.nodes, self._window_s or self.step.duration_s, client)
        workers, worker_notes, _ = read_workers(self.out_dir / (CSV_PREFIX + WINDOW_WORKERS_SUFFIX))
        notes = failure_note(total, failures) + worker_notes + self._log_notes() + self._identity_notes()
        return LoadOutcome(client=client, rates=rates, notes=notes, total=total, failures=failures,
                           users=dict(self.users.by_class), log=self.log_path, workers=workers)

    def _identity_notes(self) -> list[str]:
        """Who the node agents were where they could not be the nodes (an existing cluster, whose CA the harness does
        not hold; workers of other machines, which get no credentials of this one)."""
        if not needs_node_identities(self.scenarios):
            return []
        if self.node_identities is None:
            return ["load: node agents sent as the load's own identity, not as their nodes (the harness holds no "
                    "certificate authority of this cluster): the Node authorizer and NodeRestriction judged none "
                    "of their requests, and API Priority and Fairness put them where it puts that user"]
        if self.master is not None:
            return ["load: node agents on workers of other machines sent as each worker's own identity, not as "
                    "their nodes"]
        return []

    def _log_notes(self) -> list[str]:
        """Locust's own warnings that it ran out of CPU: then its figures understate the target."""
        logs = [self.log_path, *sorted(self.out_dir.glob("locust-worker-*.log"))]
        for log in logs:
            try:
                text = log.read_text(errors="replace")
            except OSError:
                continue
            if any(marker in text for marker in _CPU_WARNINGS):
                return [f"load: Locust reported its CPU above 90% ({log.name}): client-side figures may be "
                        "inflated and rates capped by the load generator; use more workers"]
        return []
