"""Inside the Locust processes: how a master and its workers agree on a step, and what each worker did.

A worker on another machine (`loadtest worker`) starts without the step's configuration and with its own
cluster access. Right after connecting it says hello with the identity of the cluster it reaches; the master
refuses a worker of another cluster, and sends the others the configuration minus the credentials, which the
worker completes with its own access before it builds its users. The master sends spawn jobs only once every
connected worker has its configuration.

Every worker (local or remote) adds its process CPU time, host and pid to each statistics report, so the
master can say per worker what it sent and used in the measured window, and which worker left early.

Imported only by the locustfile: it imports Locust and gevent.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import gevent
from gevent.event import Event
from locust import User, constant, task
from locust.runners import STATE_MISSING, STATE_RUNNING, MasterRunner, WorkerRunner

from loadtests.load.contract import REMOTE_WORKER_ENV, LoadConfig, RemoteWorkerSetup
from loadtests.polling import poll_until

HELLO = "loadtest_hello"
STEP_CONFIG = "loadtest_step_config"
CONFIGURED = "loadtest_configured"
REFUSED = "loadtest_refused"
REPORT_KEY = "loadtest_worker"
WATCH_INTERVAL_S = 0.5  # how often the master looks for workers that went missing
CONFIG_WAIT_S = 60.0  # a worker's spawn job waiting for the step's configuration

logger = logging.getLogger("loadtest.workers")


@dataclass
class WorkerRecord:
    """One worker as the master saw it during the step."""

    client_id: str
    label: str = ""  # e.g. "10.0.0.7 (host build-3, pid 4242)"
    remote: bool = False
    accepted: bool = False
    slot: int | None = None  # 0..N-1 among the workers it accepted, in the order they said hello
    refused: str | None = None  # why the master refused it
    requests: int = 0  # in the measured window (from the window's opening)
    failures: int = 0
    cpu: list[tuple[float, float]] = field(default_factory=list)  # (wall time, process CPU s) per report
    cpu_at_open: tuple[float, float] | None = None
    lost_at: float | None = None  # when it disconnected or went missing, if before the window closed

    def window_cpu(self) -> tuple[float | None, float | None]:
        """CPU seconds and % of a core between the last report before the window opened and the last one."""
        if self.cpu_at_open is None or not self.cpu:
            return None, None
        (t0, c0), (t1, c1) = self.cpu_at_open, self.cpu[-1]
        if t1 <= t0:
            return None, None
        return round(c1 - c0, 3), round(100.0 * (c1 - c0) / (t1 - t0), 1)


class WorkerLedger:
    """Master: who joined, from where, what each sent in the window, and who was lost before it closed."""

    def __init__(self, config: LoadConfig) -> None:
        self.config = config
        self.workers: dict[str, WorkerRecord] = {}
        self.window_open = False
        self.window_opened_at: float | None = None
        self.window_closed = False
        self.error: str | None = None

    def record(self, client_id: str) -> WorkerRecord:
        return self.workers.setdefault(client_id, WorkerRecord(client_id=client_id))

    def on_report(self, client_id: str, data: dict[str, Any]) -> None:
        worker = self.record(client_id)
        mine = data.get(REPORT_KEY) or {}
        worker.label = worker.label or str(mine.get("label") or "")
        if "cpu_s" in mine:
            worker.cpu.append((float(mine["t"]), float(mine["cpu_s"])))
        if self.window_open and not self.window_closed:
            total = data.get("stats_total") or {}
            worker.requests += int(total.get("num_requests") or 0)
            worker.failures += int(total.get("num_failures") or 0)

    def open_window(self) -> None:
        """Per-worker counts restart with the master's statistics; CPU is measured from the last report."""
        for worker in self.workers.values():
            worker.requests = worker.failures = 0
            worker.cpu_at_open = worker.cpu[-1] if worker.cpu else None
        self.window_open = True
        self.window_opened_at = time.time()

    def watch(self, runner: MasterRunner) -> None:
        """Note workers that leave (or stop answering heartbeats) while the window is open."""
        while not self.window_closed:
            active = {c.id for c in runner.clients.all if c.state != STATE_MISSING}
            for worker in self.workers.values():
                if worker.lost_at is None and worker.refused is None and worker.client_id not in active \
                        and (worker.accepted or not worker.remote):
                    worker.lost_at = time.time()
                    logger.warning(f"worker {worker.label or worker.client_id} was lost (disconnected or missing)")
            gevent.sleep(WATCH_INTERVAL_S)

    def summary(self) -> dict[str, Any]:
        """What the load generator reads back: one entry per worker that was not refused, and the refusals."""
        entries = []
        for worker in self.workers.values():
            if worker.refused is not None:
                continue
            cpu_s, cpu_pct = worker.window_cpu()
            entries.append({"worker": worker.label or worker.client_id, "remote": worker.remote,
                            "requests": worker.requests, "failures": worker.failures, "cpu_seconds": cpu_s,
                            "cpu_percent": cpu_pct,
                            "lost_after_s": self._since_open(worker.lost_at)})
        return {"workers": entries, "error": self.error,
                "refused": [f"{w.label or w.client_id}: {w.refused}" for w in self.workers.values() if w.refused]}

    def _since_open(self, at: float | None) -> float | None:
        if at is None:
            return None
        return round(max(0.0, at - (self.window_opened_at or at)), 1)

    def write(self, path: str) -> None:
        tmp = path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(self.summary(), handle, indent=1)
        os.replace(tmp, path)


def worker_report(data: dict[str, Any], label: str) -> None:
    """Worker: what every statistics report carries besides Locust's own figures."""
    data[REPORT_KEY] = {"label": label, "t": time.time(), "cpu_s": time.process_time()}


def local_label() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"


# ------------------------------------------------------------------------------------------ master side
def master_hello(ledger: WorkerLedger, runner: MasterRunner, msg: Any) -> None:
    """Master: accept a worker that reaches this run's cluster (send it the step minus credentials) or refuse
    it in one line."""
    client_id = str(msg.node_id)
    worker = ledger.record(client_id)
    worker.remote = True
    worker.label = str(msg.data.get("label") or client_id)
    theirs, ours = msg.data.get("cluster_uid"), ledger.config.cluster_uid
    if theirs != ours:
        worker.refused = (f"its kubeconfig reaches another cluster (kube-system namespace uid {theirs}; this run's "
                          f"is {ours}): point it at the run's cluster")
        logger.error(f"refused worker {worker.label}: {worker.refused}")
        forget_worker(runner, client_id)
        runner.send_message(REFUSED, {"reason": worker.refused}, client_id=client_id)
        return
    # Locust numbers workers as they connect, refused ones included; the load's strides (which worker
    # watches which node) need 0..N-1 over the accepted ones
    worker.slot = sum(1 for w in ledger.workers.values() if w.slot is not None)
    runner.send_message(STEP_CONFIG, {"config": ledger.config.without_access(), "slot": worker.slot},
                        client_id=client_id)


def forget_worker(runner: MasterRunner, client_id: str) -> None:
    """Master: drop a refused worker before it quits. Locust treats the quit of its last worker as the end of a
    headless test and stops listening, so a refused worker that came first would lock the real ones out."""
    client = runner.clients.get(client_id)
    if client is None:
        return
    del runner.clients[client_id]
    dispatcher = runner._users_dispatcher  # as Locust's own handling of a quit: users it had go elsewhere
    if dispatcher is not None:
        dispatcher.remove_worker(client)
        if not dispatcher.dispatch_in_progress and runner.state == STATE_RUNNING:
            runner.start(runner.target_user_count, runner.spawn_rate)


def master_configured(ledger: WorkerLedger, msg: Any) -> None:
    worker = ledger.record(str(msg.node_id))
    worker.accepted = True
    logger.info(f"worker {worker.label} has the step's configuration")


def wait_for_remote_workers(ledger: WorkerLedger, runner: MasterRunner, wait_s: float) -> None:
    """Master, before any spawn job goes out: every connected worker configured and enough of them; a
    refused worker leaves, so another may be needed. Gives up after wait_s with one line."""
    expected = ledger.config.remote_workers
    ready: list[int] = [0]

    def all_ready() -> bool:
        active = [c.id for c in runner.clients.all if c.state != STATE_MISSING]
        ready[0] = sum(1 for cid in active if ledger.record(cid).accepted)
        return ready[0] >= expected and ready[0] == len(active)

    if poll_until(all_ready, wait_s, interval_s=0.05):
        return
    refused = [w for w in ledger.workers.values() if w.refused]
    ledger.error = (f"waited {wait_s:.0f} s for {expected} worker(s) with this step's configuration; "
                    f"{ready[0]} ready" + (f", {len(refused)} refused" if refused else ""))
    logger.error(ledger.error)
    gevent.spawn(runner.quit)


# ------------------------------------------------------------------------------------------ worker side
class AwaitingConfig(User):
    """A remote worker's only class until the master sends the step: Locust needs one to start, and the
    master never asks for it."""

    fixed_count = 0
    wait_time = constant(1)

    @task
    def idle(self) -> None:
        """Never runs: the master's spawn jobs name the step's classes."""


def remote_setup() -> RemoteWorkerSetup | None:
    """The remote worker's own access and cluster identity, when this process is one (else None)."""
    path = os.environ.get(REMOTE_WORKER_ENV)
    if not path:
        return None
    with open(path) as handle:
        return RemoteWorkerSetup.from_dict(json.load(handle))


def write_status(setup: RemoteWorkerSetup, state: str, **details: Any) -> None:
    """For the `loadtest worker` process that started this one: configured, or refused and why."""
    tmp = setup.status_file + ".tmp"
    with open(tmp, "w") as handle:
        json.dump({"state": state, **details}, handle)
    os.replace(tmp, setup.status_file)


def join_as_remote_worker(environment: Any, setup: RemoteWorkerSetup,
                          build: Callable[[LoadConfig], list[Any]]) -> None:
    """Worker: say hello; on the step's configuration build the users with this machine's own access."""
    runner: WorkerRunner = environment.runner
    configured = Event()
    start_worker = runner.start_worker

    def start_when_configured(user_classes_count: dict[str, int], **kwargs: Any) -> None:
        """A spawn job can overtake the configuration (a worker joining a step that runs): it waits for it."""
        if configured.wait(timeout=CONFIG_WAIT_S):
            start_worker(user_classes_count, **kwargs)

    runner.start_worker = start_when_configured  # type: ignore[method-assign]

    def on_config(environment: Any, msg: Any, **_: Any) -> None:
        config = LoadConfig.from_dict({**msg.data["config"], "access": asdict(setup.access)})
        runner.worker_index = int(msg.data["slot"])
        environment.user_classes = build(config)
        configured.set()
        write_status(setup, "configured", run_id=config.run_id, final=config.final_step)
        runner.send_message(CONFIGURED, {"label": setup.label})

    def on_refused(environment: Any, msg: Any, **_: Any) -> None:
        reason = str(msg.data.get("reason"))
        logger.error(f"the master refused this worker: {reason}")
        write_status(setup, "refused", reason=reason)
        gevent.spawn(runner.quit)

    runner.register_message(STEP_CONFIG, on_config)
    runner.register_message(REFUSED, on_refused)
    runner.send_message(HELLO, {"label": setup.label, "cluster_uid": setup.cluster_uid})


# ------------------------------------------------------------------------------------------ live view
CHANGES = ("/swarm", "/stop", "/stats/reset")


def read_only(web_ui: Any) -> None:
    """Locust's web UI shows the run but does not steer it: the plan decides the load, so requests that
    would change the users or reset the figures are refused."""
    from flask import Response, request

    @web_ui.app.before_request
    def refuse_changes() -> Response | None:
        if request.method == "POST" and request.path.rstrip("/").endswith(CHANGES):
            return Response("read-only: the plan decides this run's load", status=403, mimetype="text/plain")
        return None
