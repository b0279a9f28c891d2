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

import argparse
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests.cli.flags import seconds_arg
from loadtests.errors import LoadTestError, TargetError
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.paths import resource_path

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


# ------------------------------------------------------------------------------------------ the run's side
def add_run_options(parser: argparse.ArgumentParser, *, distributed: bool = True) -> None:
    """--ui, and with `distributed` the options of workers on other machines (existing clusters only)."""
    parser.add_argument("--ui", action="store_true",
                        help="serve Locust's web UI on 127.0.0.1 (read-only; the plan decides the load)")
    if not distributed:
        return
    parser.add_argument("--master-bind", metavar="ADDR:PORT",
                        help="existing cluster: each step's Locust master listens here for workers of other "
                             f"machines (`loadtest worker`); default 127.0.0.1:{DEFAULT_MASTER_PORT} with "
                             "--expect-workers")
    parser.add_argument("--expect-workers", type=int, default=None, metavar="N",
                        help="wait for N `loadtest worker` processes each step; they share the users")
    parser.add_argument("--worker-wait", type=seconds_arg, default=WORKER_WAIT_S, metavar="SECONDS",
                        help=f"how long a step waits for its workers (default {WORKER_WAIT_S:.0f})")


def check_run_options(plan: Any, args: argparse.Namespace) -> None:
    """Before anything starts: where the masters listen (kept on args for run_options)."""
    args.master_config = master_bind(plan, args)


def master_bind(plan: Any, args: argparse.Namespace) -> MasterBind | None:
    """The run's --master-bind/--expect-workers, checked before anything starts; None without them."""
    bind, expected = getattr(args, "master_bind", None), getattr(args, "expect_workers", None)
    if bind is None and expected is None:
        return None
    if expected is None:
        raise RemoteWorkerError(f"--master-bind {bind}: say how many workers to wait for with --expect-workers N")
    if expected < 1:
        raise RemoteWorkerError(f"--expect-workers {expected}: a run with workers of other machines needs at "
                                "least one (leave the flag out to run the load on this machine)")
    if plan.target.kind != "cluster" and not getattr(args, "kubeconfig", None):
        raise RemoteWorkerError("--master-bind/--expect-workers: workers of other machines join runs against an "
                                "existing cluster only (--kubeconfig K --context C --allow-context C); a local "
                                "control plane listens on loopback alone")
    local_workers = plan.workers if args.workers is None else args.workers
    if local_workers:
        raise RemoteWorkerError(f"--expect-workers {expected} with {local_workers} local worker processes "
                                "(--workers or the plan's workers): start local ones as `loadtest worker` too")
    if not args.worker_wait > 0:
        raise RemoteWorkerError(f"--worker-wait {args.worker_wait:g}: expected a number of seconds > 0")
    host, port = parse_address(bind, "--master-bind") if bind else ("127.0.0.1", DEFAULT_MASTER_PORT)
    check_local_address(host, "--master-bind", port)
    return MasterBind(host=host, port=port, workers=expected, wait_s=args.worker_wait)


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """RunOptions fields from the command line (check_run_options has checked them)."""
    from loadtests.controlplane.processes import free_ports

    return {"master": getattr(args, "master_config", None),
            "ui_port": free_ports(1)[0] if getattr(args, "ui", False) else None,
            "runs_follow": getattr(args, "runs_follow", 0)}


def cluster_identity(access: ClusterAccess, where: str = "") -> str:
    """The uid of the cluster's kube-system namespace: the same cluster answers with the same uid, whoever
    asks, and two clusters never share one."""
    from loadtests.kube.rest import RestClient

    where = where or access.server
    client = RestClient(access, timeout_s=15.0)
    try:
        return str(client.get(resource_path("namespaces", name="kube-system"))["metadata"]["uid"])
    except ApiError as error:
        what = f"HTTP {error.status}: {error.reason}" if error.status else error.reason
        raise TargetError(f"cannot tell which cluster {where} is (GET namespace kube-system: {what}); the "
                          "kubeconfig's user needs to read namespaces") from None
    finally:
        client.close()


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
        if not self._wait(lambda: reachable(self.host, self.port, source=self.source), connect_timeout_s):
            raise RemoteWorkerError(f"--master {self.master}: nothing answers there within {connect_timeout_s:g} s; "
                                    "start the run first (`loadtest run ... --master-bind "
                                    f"{self.master} --expect-workers N`) and check the address and firewall")
        served = 0
        while True:
            status = self._step(served + 1)
            if status.state == "refused":
                raise RemoteWorkerError(f"the master at {self.master} refused this worker: {status.reason}")
            if status.state != "configured":
                raise RemoteWorkerError(f"the Locust worker for step {served + 1} ended (exit code {status.code}) "
                                        f"before the master at {self.master} sent it the step; see "
                                        f"{self._log(served + 1)}")
            served += 1
            if status.final:
                self.say(f"step {served} of run {status.run_id} served: the run's last step; done")
                return served
            self.say(f"step {served} of run {status.run_id} served; waiting for the next step's master")
            self._wait(lambda: not reachable(self.host, self.port, source=self.source), PORT_CLOSE_WAIT_S)
            if not self._wait(lambda: reachable(self.host, self.port, source=self.source), idle_timeout_s):
                self.say(f"no master at {self.master} for {idle_timeout_s:g} s: the run is over "
                         f"({served} step(s) served)")
                return served

    @staticmethod
    def _wait(condition: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def _log(self, step: int) -> Path:
        return self.log_dir / f"locust-worker-step-{step}.log"

    def _step(self, step: int) -> StepStatus:
        """One Locust worker process through one step: it says hello, gets the step or a refusal, runs."""
        from loadtests.load.contract import REMOTE_WORKER_ENV, RemoteWorkerSetup
        from loadtests.load.generator import locust_env, locust_spawn, locust_worker_command

        status_file = self.workdir / f"step-{step}.json"
        setup_file = self.workdir / "worker.json"
        setup = RemoteWorkerSetup(access=self.access, cluster_uid=self.cluster_uid, label=self.label,
                                  status_file=str(status_file))
        fd = os.open(setup_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it names the credentials
        with os.fdopen(fd, "w") as handle:
            json.dump(setup.to_dict(), handle)
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


def cmd_worker(args: argparse.Namespace) -> int:
    """`loadtest worker`: join a run's steps from this machine, with this machine's own access."""
    from loadtests.binaries import cache as binaries
    from loadtests.controlplane.existing import guard

    host, port = parse_address(args.master, "--master")
    if args.bind:
        check_local_address(args.bind, "--bind")
    if not args.kubeconfig:
        raise RemoteWorkerError("loadtest worker needs --kubeconfig FILE --context NAME --allow-context NAME: each "
                                "worker reaches the cluster with its own credentials, which never leave it")
    for flag, value in (("--connect-timeout", args.connect_timeout), ("--idle-timeout", args.idle_timeout)):
        if not value > 0:
            raise RemoteWorkerError(f"{flag} {value:g}: expected a number of seconds > 0")
    context = guard(args.kubeconfig, args.context, args.allow_context)
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-worker-"))  # mode 0700: credential files
    log_dir = Path(args.log_dir) if args.log_dir else binaries.cache_root() / "logs" / f"worker-{os.getpid()}"
    worker = None
    try:
        access = context.materialize(workdir)
        uid = cluster_identity(access, f"context {context.name!r} ({context.server})")
        worker = RemoteWorker(host, port, access, uid, workdir, log_dir, source=args.bind, say=_say)
        _say(f"worker {worker.label}: cluster {context.server} (kube-system uid {uid}); joining the run at "
             f"{worker.master}; logs in {log_dir}")
        worker.serve(args.connect_timeout, args.idle_timeout)
    finally:
        if worker is not None:
            worker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _say(message: str) -> None:
    print(message, flush=True)


def add_worker_command(sub: Any) -> None:
    p = sub.add_parser("worker", help="join a run's load from this machine (its master started with "
                                      "--master-bind ADDR:PORT --expect-workers N)")
    p.add_argument("--master", required=True, metavar="HOST:PORT", help="the run's --master-bind address")
    p.add_argument("--kubeconfig", help="this machine's kubeconfig for the run's cluster")
    p.add_argument("--context", help="the kubeconfig context to use")
    p.add_argument("--allow-context", help="confirm the context by repeating its name (safety guard)")
    p.add_argument("--bind", metavar="ADDR", help="connect to the master from this local address")
    p.add_argument("--connect-timeout", type=seconds_arg, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
                   help=f"wait this long for the run's master (default {CONNECT_TIMEOUT_S:.0f})")
    p.add_argument("--idle-timeout", type=seconds_arg, default=IDLE_TIMEOUT_S, metavar="SECONDS",
                   help=f"after a step, wait this long for the next one (default {IDLE_TIMEOUT_S:.0f})")
    p.add_argument("--log-dir", help="where the Locust worker logs go (default: the cache's logs folder)")
    p.set_defaults(func=cmd_worker)
