"""Start, watch and stop the processes of a local control plane, by pid only.

Each process is recorded (pid and start time) in the cluster's state file the moment it starts, so a later
`loadtest down`, a signal handler or a crash handler can stop exactly what was started and nothing else.
A cluster that belongs to one run is tied to that run's process: on Linux its processes get a parent-death
signal, and everywhere its state names its owner, so a cluster whose owner is gone is found (an orphan).
"""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from loadtests.controlplane.logs import error_line, last_line
from loadtests.errors import TargetError
from loadtests.kube.kept import KeptConnection
from loadtests.kube.rest import TRANSPORT_ERRORS, send_once
from loadtests.polling import poll_until
from loadtests.shutdown import ended_how

LOOPBACK = "127.0.0.1"


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, *, interval_s: float = 0.2,
             abort: Callable[[], str | None] | None = None) -> None:
    """Poll a condition until it holds, else a TargetError naming `what`; `abort` may return a reason to give
    up early (e.g. a process died)."""
    reasons: list[str] = []

    def aborted() -> bool:
        reason = abort() if abort is not None else None
        if reason:
            reasons.append(reason)
        return bool(reason)

    if not poll_until(condition, timeout_s, interval_s=interval_s, abort=aborted):
        raise TargetError(f"{what}: {reasons[0] if reasons else f'not reached within {timeout_s:.0f} s'}")


def http_ok(url: str, context: ssl.SSLContext | None = None, expect: bytes | None = None,
            timeout_s: float = 2.0, *, kept: KeptConnection | None = None) -> bool:
    """Whether a health endpoint answers 200 (and contains `expect`); any failure to connect is a no. `kept`:
    on that kept connection (its own TLS), for a check made each second; else on a connection of its own."""
    try:
        response = (kept.get(url, timeout_s) if kept is not None
                    else send_once("GET", url, tls=context, timeout_s=timeout_s))
    except TRANSPORT_ERRORS:
        return False
    return response.status == 200 and (expect is None or expect in response.data)


def port_is_free(port: int) -> bool:
    """Whether a server could listen on the port now (connections lingering in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together while choosing, so none is picked twice)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def listening_ports(pids: Iterable[int]) -> list[int]:
    """TCP ports some of these pids still listen on (used to prove teardown freed everything)."""
    wanted = set(pids)
    ports = []
    for conn in psutil.net_connections(kind="tcp"):
        if conn.pid in wanted and conn.status == psutil.CONN_LISTEN and conn.laddr:
            ports.append(conn.laddr.port)
    return sorted(ports)


SAME_START_S = 1.0  # two start times of one pid this close are one process (the boot time is in whole seconds)


def started_since_boot(process: psutil.Process) -> float:
    """When `process` started, in seconds since the machine booted: the kernel's own count, which no step of the
    wall clock moves. psutil's create_time is this plus the boot time on the wall clock, and that moves with
    every step (NTP, a virtual machine resumed from a snapshot)."""
    return process.create_time() - psutil.boot_time()


def identified(pid: int, create_time: float, since_boot_s: float | None) -> psutil.Process | None:
    """Process `pid` if it is the one that started then, else None (gone, or its pid reused). Compared since
    boot where that was recorded: by wall-clock start times, a step of the clock made every process of a run
    look gone at once, and the run ended with its control plane still running."""
    try:
        proc = psutil.Process(pid)
        moved = (abs(started_since_boot(proc) - since_boot_s) if since_boot_s is not None
                 else abs(proc.create_time() - create_time))  # a record written before since_boot_s was kept
    except psutil.Error:
        return None
    return proc if moved <= SAME_START_S else None


@dataclass
class ProcessRecord:
    component: str
    pid: int
    create_time: float  # on the wall clock, for people; since_boot_s tells the process from a later one
    argv: list[str]
    log: str
    since_boot_s: float | None = None

    def process(self) -> psutil.Process | None:
        """The live process, or None if it is gone or the pid now belongs to something else."""
        proc = identified(self.pid, self.create_time, self.since_boot_s)
        try:
            return None if proc is None or proc.status() == psutil.STATUS_ZOMBIE else proc
        except psutil.Error:
            return None

    def alive(self) -> bool:
        return self.process() is not None


@dataclass
class ClusterState:
    """What is running for one local cluster; persisted as state.json in the cluster folder."""

    name: str
    directory: str
    kube_version: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    server: str = ""
    kubeconfig: str = ""
    etcd_metrics_url: str = ""
    # each apiserver by instance name -> its own URL (`server` is theirs in common: the load balancer's with
    # more than one); each etcd member -> its /metrics URL
    apiservers: dict[str, str] = field(default_factory=dict)
    etcd_members: dict[str, str] = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)
    owner_pid: int = 0  # the process that ran `up`; while it is alive and not done, up is in progress
    owner_create_time: float = 0.0  # with owner_pid: tells the owner from a later process with its pid
    owner_since_boot_s: float | None = None  # the same, unmoved by a step of the wall clock (see identified)
    tied_to_owner: bool = False  # a run's own cluster: it must not outlive its owner (else it is an orphan)
    ready: bool = False

    @property
    def path(self) -> Path:
        return Path(self.directory) / "state.json"

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, directory: Path) -> ClusterState | None:
        try:
            data = json.loads((directory / "state.json").read_text())
        except (OSError, ValueError):
            return None
        data["processes"] = [ProcessRecord(**p) for p in data.get("processes", [])]
        return cls(**data)

    def pids(self) -> dict[str, list[int]]:
        return {p.component: [p.pid] for p in self.processes if p.alive()}

    def running(self) -> list[ProcessRecord]:
        return [p for p in self.processes if p.alive()]

    def owner_alive(self) -> bool:
        if not self.owner_pid:
            return False
        return identified(self.owner_pid, self.owner_create_time, self.owner_since_boot_s) is not None

    def orphaned(self) -> bool:
        """A run's cluster still running after its owner is gone (the harness was killed outright)."""
        return self.tied_to_owner and not self.owner_alive() and bool(self.running())

    def running_names(self) -> list[str]:
        """`etcd (pid 123)` for each process still running, for messages."""
        return [f"{p.component} (pid {p.pid})" for p in self.running()]


DOWN_REQUEST = "down-request.json"  # in the cluster folder: who asked `loadtest down` to stop it, and when


@dataclass(frozen=True)
class DownRequest:
    """Who asked for a cluster to be stopped (`loadtest down`), written in its folder before anything stops: the
    run that owns the cluster then says that its control plane was stopped from outside, and by whom, rather than
    naming the first component it saw end. What cannot be known (no terminal, no parent) is left empty."""

    pid: int
    user: str
    at: str  # local time of the request, HH:MM:SS
    tty: str = ""
    parent: str = ""  # the command that ran `loadtest down` (a shell, a script, make)

    @classmethod
    def here(cls) -> DownRequest:
        """This process's request: its pid, user, terminal and parent command, now."""
        me = psutil.Process()
        tty, parent = "", ""
        with contextlib.suppress(psutil.Error, AttributeError):
            tty = me.terminal() or ""
        with contextlib.suppress(psutil.Error, AttributeError):
            above = me.parent()
            parent = " ".join(above.cmdline())[:80] if above is not None else ""
        return cls(pid=me.pid, user=_user(), at=time.strftime("%H:%M:%S"), tty=tty, parent=parent)

    def save(self, directory: Path) -> None:
        path = directory / DOWN_REQUEST
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, directory: Path) -> DownRequest | None:
        try:
            data = json.loads((directory / DOWN_REQUEST).read_text())
            return cls(**{key: data[key] for key in ("pid", "user", "at")},
                       tty=str(data.get("tty", "")), parent=str(data.get("parent", "")))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def said(self) -> str:
        """"`loadtest down` by pid 4242, user alice on /dev/pts/3 (from -bash) at 14:02:07"."""
        tty = f" on {self.tty}" if self.tty else ""
        parent = f" (from {self.parent})" if self.parent else ""
        return f"`loadtest down` by pid {self.pid}, user {self.user}{tty}{parent} at {self.at}"


def _user() -> str:
    """Who runs this process: the login name, else the uid's name, else the uid."""
    with contextlib.suppress(OSError, KeyError):
        return getpass.getuser()
    return str(os.getuid())


class ProcessGroup:
    """The processes of one cluster: started in order, stopped in reverse, each by its own pid."""

    def __init__(self, state: ClusterState, log_dir: Path, kept_log_dir: Path | None = None) -> None:
        """`kept_log_dir`: where the logs will be once the cluster is gone (a run keeps them with its results),
        so a message about an exit points where its reader will find the log."""
        self.state = state
        self.log_dir = log_dir
        self.kept_log_dir = kept_log_dir
        self._popen: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._closed = False  # stop_all has begun: nothing more starts (a rolling upgrade's restart, say)
        self.stopping: set[int] = set()  # pids being stopped on purpose one by one (not dead components)

    def start(self, component: str, argv: list[str], env: dict[str, str] | None = None) -> ProcessRecord:
        with self._lock:
            if self._closed:
                raise TargetError(f"{component} not started: the cluster is being stopped")
            return self._start(component, argv, env)

    def _start(self, component: str, argv: list[str], env: dict[str, str] | None) -> ProcessRecord:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{component}.log"
        with open(log_path, "ab") as log:
            options: dict[str, Any] = {
                "stdout": log, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL,
                "start_new_session": True,  # a terminal's Ctrl-C reaches us, and we stop them in order
                "env": {**os.environ, **(env or {})}}
            # argv built by the harness from known binaries
            popen = popen_tied(argv, **options) if self.state.tied_to_owner else subprocess.Popen(argv, **options)
        self._popen[popen.pid] = popen
        try:
            started = psutil.Process(popen.pid)
            create_time, since_boot_s = started.create_time(), started_since_boot(started)
        except psutil.Error:  # gone already: its exit is read from popen
            create_time, since_boot_s = time.time(), None
        record = ProcessRecord(component, popen.pid, create_time, argv, str(log_path), since_boot_s)
        self.state.processes.append(record)
        self.state.save()
        return record

    def exit_reason(self, record: ProcessRecord) -> str | None:
        """Why a process is gone, in one line, or None while it runs: "exited (code 2): <the error line of its
        log>; full log: <path>", or "killed by SIGKILL; ..."."""
        popen = self._popen.get(record.pid)
        if popen is not None:
            code = popen.poll()
            if code is None:
                return None
        elif record.alive():
            return None
        else:
            code = None  # not our child (another harness started it): its exit code is not ours to read
        log = Path(record.log)
        return exit_text(code, log, shown=self.kept_log_dir / log.name if self.kept_log_dir else None)

    def exited(self, record: ProcessRecord) -> str | None:
        """`exit_reason`, naming the component: "etcd exited (code 2): ..."."""
        reason = self.exit_reason(record)
        return f"{record.component} {reason}" if reason else None

    def _stop_and_reap(self, record: ProcessRecord, timeout_s: float) -> bool:
        """stop_process, then read the exit of a child of ours (no zombie left); True when SIGKILL was needed."""
        killed = stop_process(record, timeout_s)
        popen = self._popen.pop(record.pid, None)
        if popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=1)
        return killed

    def stop(self, record: ProcessRecord, timeout_s: float) -> bool:
        """Stop one process (SIGTERM, SIGKILL after timeout_s) and forget it: a component replaced on purpose
        is not a dead one. True when SIGKILL was needed."""
        self.stopping.add(record.pid)
        killed = self._stop_and_reap(record, timeout_s)
        self.state.processes = [r for r in self.state.processes if r is not record]
        self.state.save()
        self.stopping.discard(record.pid)
        return killed

    def stop_all(self, timeout_s: float = 15.0) -> list[str]:
        """Stop every recorded process, newest first; returns the components that needed SIGKILL."""
        with self._lock:
            self._closed = True
        killed = []
        for record in reversed(self.state.processes):
            if self._stop_and_reap(record, timeout_s):
                killed.append(record.component)
        self.state.processes = [r for r in self.state.processes if r.alive()]
        self.state.ready = False
        with contextlib.suppress(FileNotFoundError):  # its folder removed meanwhile: by the run that owns it
            self.state.save()
        return killed


def die_with_parent() -> None:
    """In a child, before exec: SIGKILL it when the process that started it dies (Linux's parent-death
    signal), so a harness killed outright leaves no control plane behind. Elsewhere orphans are found by
    their state's owner instead."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def popen_tied(argv: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """subprocess.Popen of a child that dies with this process (die_with_parent). Linux sends the parent-death
    signal when the thread that forked the child ends, not the process: a child started from a thread that ends
    sooner (a rolling upgrade's, which restarts components) would be killed with it. So such a child is forked by
    the main thread, or by one spawner thread that lives as long as the process."""
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(argv, preexec_fn=die_with_parent, **options)
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")
    return _spawner.submit(subprocess.Popen, argv, preexec_fn=die_with_parent, **options).result()


def stop_process(record: ProcessRecord, timeout_s: float) -> bool:
    """SIGTERM, wait, then SIGKILL; True when SIGKILL was needed. Never touches a reused pid. A stopped
    process (SIGSTOP: a hung component) is continued after the SIGTERM, so it can act on it."""
    proc = record.process()
    if proc is None:
        return False
    with contextlib.suppress(psutil.Error):
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)
    try:
        proc.wait(timeout=timeout_s)
        return False
    except psutil.TimeoutExpired:
        with contextlib.suppress(psutil.Error):
            proc.kill()
            proc.wait(timeout=5)
        return True
    except psutil.Error:
        return False


def exit_text(code: int | None, log: Path, shown: Path | None = None) -> str:
    """"exited (code 2): failed to open database: ... no space left on device; full log: /x/etcd.log", or
    "killed by SIGKILL; ..." for a negative code (Popen's way of saying a signal ended it). The log is read at
    `log` and named as `shown` (where it will be kept), if given."""
    return ended_text(ended_how(code), log, shown)


def ended_text(how: str, log: Path, shown: Path | None = None) -> str:
    """`how` a process ended ("exited (code 2)", "did not finish within 90 s"), then in the same line the cause
    its log gives and where the whole log is: "<how>: <its error line>; full log: <path>", or "<how>; its log
    ends: <its last line>; ...". The log's tail stays in the log, never in the line."""
    said, named = error_line(log), shown or log
    if said:
        return f"{how}: {said}; full log: {named}"
    last = last_line(log)
    return f"{how}; its log ends: {last}; full log: {named}" if last else f"{how}; its log is empty: {named}"
