"""Load from more than one machine, and a live view of a run.

`loadtest run ... --master-bind ADDR:PORT --expect-workers N` makes each step's Locust master listen on that
address and wait for N workers; `loadtest worker --master ADDR:PORT --kubeconfig K --context C
--allow-context C` on another machine serves the run's steps one after the other. Credentials never travel:
each worker uses its own kubeconfig behind the same guard as the run, and the master refuses a worker that
reaches another cluster (loadtests/load/locust/worker_link.py does the handshake inside Locust). `--ui` serves
Locust's own web UI on 127.0.0.1, read-only: the plan decides the load.

Nothing here imports Locust; the worker's Locust process is a child, like the run's own.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadtests.errors import LoadTestError
from loadtests.kube.access import ClusterAccess
from loadtests.kube.private import write_private
from loadtests.polling import poll_until
from loadtests.shutdown import ended_how

DEFAULT_MASTER_PORT = 5557  # Locust's own default
WORKER_WAIT_S = 120.0  # default: how long a step's master waits for its workers
CONNECT_TIMEOUT_S = 600.0  # default: how long a worker waits for the run's first master (step 1 ramps first)
IDLE_TIMEOUT_S = 900.0  # default: how long a worker waits for the next step's master before it calls it a day
PORT_CLOSE_WAIT_S = 60.0  # after a step: the finished master releasing its port


class RemoteWorkerError(LoadTestError):
    """A worker of another machine cannot join, or a run cannot take them: one line, exit 2."""


@dataclass(frozen=True)
class MasterBind:
    """Where each step's Locust master listens, and for how many workers of other machines it waits."""

    host: str
    port: int
    workers: int
    wait_s: float = WORKER_WAIT_S

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


# ------------------------------------------------------------------------------------------ addresses
def parse_address(text: str, flag: str) -> tuple[str, int]:
    """HOST:PORT (or [IPv6]:PORT) as a host and a port, or one line saying what is wrong."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise RemoteWorkerError(f"{flag} {text!r}: expected HOST:PORT, e.g. 10.0.0.5:{DEFAULT_MASTER_PORT}")
    return host, int(port_text)


def check_local_address(host: str, flag: str, port: int = 0) -> None:
    """Refuse an address this machine cannot listen on (not one of its own), or a port already taken."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise RemoteWorkerError(f"{flag} {host}: cannot resolve it ({error.strerror})") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRNOTAVAIL:
                raise RemoteWorkerError(f"{flag} {host}: not an address of this machine; name one of its own "
                                        "interfaces (or 0.0.0.0 for all of them)") from None
            if error.errno == errno.EADDRINUSE:
                raise RemoteWorkerError(f"{flag} {host}:{port}: the port is in use; choose another") from None
            raise RemoteWorkerError(f"{flag} {host}:{port}: cannot listen there ({error.strerror})") from None


def reachable(host: str, port: int, timeout_s: float = 1.0, source: str | None = None) -> bool:
    """Whether something accepts TCP connections at host:port (from `source`, when given)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s,
                                      source_address=(source, 0) if source else None):
            return True
    except OSError:
        return False


# ------------------------------------------------------------------------------------------ the worker's side
@dataclass
class StepStatus:
    """How one Locust worker process ended: configured by the master (and ran the step), refused, or
    neither (it never got a step)."""

    state: str
    reason: str = ""
    run_id: str = ""
    final: bool = False  # the run's last planned step
    code: int | None = None


class RemoteWorker:
    """`loadtest worker`: one Locust worker process per step of the run, each joining that step's master
    at the same address; ends when the master refuses it or no further step comes."""

    def __init__(self, host: str, port: int, access: ClusterAccess, cluster_uid: str, workdir: Path,
                 log_dir: Path, source: str | None = None, say: Callable[[str], None] = print) -> None:
        self.host, self.port, self.source = host, port, source
        self.access = access
        self.cluster_uid = cluster_uid
        self.workdir = workdir
        self.log_dir = log_dir
        self.say = say
        self.label = f"{source or socket.gethostname()} (pid {os.getpid()})"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def master(self) -> str:
        return f"{self.host}:{self.port}"

    def serve(self, connect_timeout_s: float, idle_timeout_s: float) -> int:
        """Serve step after step; the number of steps served."""
        if not poll_until(lambda: reachable(self.host, self.port, source=self.source), connect_timeout_s):
            raise RemoteWorkerError(f"--master {self.master}: nothing answers there within {connect_timeout_s:g} s; "
                                    "start the run first (`loadtest run ... --master-bind "
                                    f"{self.master} --expect-workers N`) and check the address and firewall")
        served = 0
        while True:
            status = self._step(served + 1)
            if status.state == "refused":
                raise RemoteWorkerError(f"the master at {self.master} refused this worker: {status.reason}")
            if status.state != "configured":
                raise RemoteWorkerError(f"the Locust worker for step {served + 1} {ended_how(status.code)} "
                                        f"before the master at {self.master} sent it the step; see "
                                        f"{self._log(served + 1)}")
            served += 1
            if status.final:
                self.say(f"step {served} of run {status.run_id} served: the run's last step; done")
                return served
            self.say(f"step {served} of run {status.run_id} served; waiting for the next step's master")
            poll_until(lambda: not reachable(self.host, self.port, source=self.source), PORT_CLOSE_WAIT_S)
            if not poll_until(lambda: reachable(self.host, self.port, source=self.source), idle_timeout_s):
                self.say(f"no master at {self.master} for {idle_timeout_s:g} s: the run is over "
                         f"({served} step(s) served)")
                return served

    def _log(self, step: int) -> Path:
        return self.log_dir / f"locust-worker-step-{step}.log"

    def _step(self, step: int) -> StepStatus:
        """One Locust worker process through one step: it says hello, gets the step or a refusal, runs."""
        from loadtests.load.contract import REMOTE_WORKER_ENV, RemoteWorkerSetup
        from loadtests.load.processes import locust_env, locust_spawn, locust_worker_command

        status_file = self.workdir / f"step-{step}.json"
        setup_file = self.workdir / "worker.json"
        setup = RemoteWorkerSetup(access=self.access, cluster_uid=self.cluster_uid, label=self.label,
                                  status_file=str(status_file))
        write_private(setup_file, json.dumps(setup.to_dict()).encode())  # it names the credentials
        # zmq's "source;destination" endpoint: connect from the address given with --bind
        master_host = f"{self.source}:0;{self.host}" if self.source else self.host
        cmd = locust_worker_command(sys.executable, master_host, self.port)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self._log(step), "wb") as log:
            self._proc = locust_spawn(cmd, log, locust_env({REMOTE_WORKER_ENV: str(setup_file)}), self.workdir)
            code = self._proc.wait()
        self._proc = None
        try:
            data = json.loads(status_file.read_text())
        except (OSError, ValueError):
            return StepStatus(state="none", code=code)
        return StepStatus(state=str(data.get("state")), reason=str(data.get("reason") or ""),
                          run_id=str(data.get("run_id") or ""), final=bool(data.get("final")), code=code)

    def stop(self) -> None:
        """The Locust worker process of the current step, if any (by pid): SIGTERM, then SIGKILL."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
