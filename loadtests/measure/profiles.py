"""Where the control plane's CPU went: pprof profiles of kube-apiserver and etcd over a step's measured window.

The audit log names the client; a profile names the code. Per window: a CPU profile of each apiserver and of the
main etcd (`GET /debug/pprof/profile?seconds=N`, which blocks for N seconds, in a thread of its own) and a heap
profile of each at the window's close (`/debug/pprof/heap`), over the same TLS and credentials the harness
already uses (the admin's for the apiserver, the apiserver's etcd client certificate for etcd's client URL).
The raw files are kept in the step's folder as served, so `go tool pprof` opens them; analysis/profiles.py
reads them into the step's results.

When in the window: a plain step's window lasts its duration_s, so its CPU profile is its last min(duration_s,
cpu_max_s) seconds, ending with the window. A ClusterLoader2 phase's window ends when the phase is done, so it is
profiled in pieces of CHUNK_S seconds back to back from its start (at most cpu_max_s in all); the piece under way
when the window closes is cut off, and the seconds profiled say how much of the window the profile covers.

kube-apiserver serves /debug/pprof when started with --profiling (its default) and etcd with --enable-pprof; a
local control plane starts both so (plan `profiles.enabled`). On an existing cluster the apiserver is profiled
where its /debug/pprof answers those credentials; etcd is not reachable there. What cannot be profiled is said in
one note of the step, never an error.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import urllib3

from loadtests.analysis import profiles as analysis
from loadtests.controlplane.base import TargetInfo
from loadtests.kube.access import ClusterAccess
from loadtests.kube.rest import TRANSPORT_ERRORS, pool_manager, short_error
from loadtests.results import StepResult
from loadtests.results.profiles import ComponentProfile

USER_AGENT = "k8s-loadtest/probe-profiles"
PROFILES_DIR = "profiles"  # in the step's folder
CHUNK_S = 10  # a phase's window, whose end is not known, is profiled in pieces this long
DEFAULT_CPU_MAX_S = 60  # the plan's profiles.cpu_max_s unless it says otherwise
MIN_CPU_S = 1  # pprof takes whole seconds
GRACE_S = 30.0  # a profile's answer may take this long after its seconds (writing it out)
HEAP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ProfileSettings:
    """What a window's profiles need to know of the step: where to keep them and how long the window lasts."""

    folder: Path  # the step's profiles/ folder
    run_folder: Path  # results name the files relative to it
    window_s: float  # the window's duration (a phase's: the most it may last)
    fixed: bool = True  # False: a phase's window, which may end sooner
    cpu_max_s: int = DEFAULT_CPU_MAX_S
    # why the apiservers' CPU is not profiled in this window ("": it is): one replaced in the window (a rolling
    # upgrade, a restart) would wait for the profile, a request of the window's length, before it stops
    apiserver_cpu_skipped: str = ""


@dataclass(frozen=True)
class Endpoint:
    """A component's pprof endpoint: its base URL and who asks."""

    component: str
    base: str  # https://host:port
    access: ClusterAccess


def endpoints(info: TargetInfo) -> tuple[list[Endpoint], list[str]]:
    """Every component of the target whose profiles can be asked for; why the others cannot."""
    apiservers = info.apiservers or {analysis.APISERVER: info.access.server}
    found = [Endpoint(instance, url.rstrip("/"), info.access) for instance, url in apiservers.items()]
    missing = []
    if info.etcd_client is not None:
        found.append(Endpoint(analysis.ETCD, info.etcd_client.server.rstrip("/"), info.etcd_client))
    else:
        missing.append(f"{analysis.ETCD}: not reachable on this target")
    return found, missing


class Fetch:
    """One GET of a pprof endpoint on a connection of its own, so that another thread can cut it off (a phase's
    window closing mid-profile): the server then stops profiling at once, instead of holding its one CPU profile
    until its seconds are over. Through a kubeconfig's proxy it goes over a pooled connection, which cannot be cut."""

    def __init__(self, endpoint: Endpoint, path: str, timeout_s: float) -> None:
        self.endpoint, self.path, self.timeout_s = endpoint, path, timeout_s
        self._connection: urllib3.connection.HTTPSConnection | None = None
        self._cut = False
        self._lock = threading.Lock()

    def get(self) -> bytes:
        """The body as served; OSError naming the status for anything but 200, or an answer that is no profile."""
        access = self.endpoint.access
        url = self.endpoint.base + self.path
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **access.auth_headers()}
        if access.proxy_url:
            pool = pool_manager(access, num_pools=1, maxsize=1)
            try:
                response = pool.request("GET", url, headers=headers, retries=False, decode_content=False,
                                        timeout=urllib3.Timeout(connect=5.0, read=self.timeout_s))
                return self._checked(response.status, response.data)
            finally:
                pool.clear()
        split = urlsplit(url)
        connection = urllib3.connection.HTTPSConnection(split.hostname or "", split.port, timeout=self.timeout_s,
                                                        ssl_context=access.ssl_context())
        try:
            with self._lock:
                self._connection = connection
                self._raise_if_cut()
            connection.connect()
            with self._lock:  # a cut() while it connected found no socket to shut
                self._raise_if_cut()
            connection.request("GET", self.path, headers=headers, preload_content=False, decode_content=False)
            response = connection.getresponse()
            return self._checked(response.status, response.read())
        finally:
            connection.close()

    @staticmethod
    def _checked(status: int, body: bytes) -> bytes:
        if status != 200:
            first = body.decode("utf-8", "replace").strip().splitlines()[:1]
            raise OSError(f"HTTP {status}: {' '.join(first)[:200]}")
        if body[:2] != b"\x1f\x8b":
            raise OSError(f"the answer is not a gzipped profile ({len(body)} bytes starting {body[:20]!r})")
        return body

    def _raise_if_cut(self) -> None:
        if self._cut:
            raise OSError("cut off before it was sent")

    def cut(self) -> None:
        """End the request from another thread (its get() then raises)."""
        with self._lock:
            self._cut = True
            connection = self._connection
        sock = getattr(connection, "sock", None) if connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)


@dataclass
class _Piece:
    """One CPU profile of a component: when it began (seconds after the window opened), how long, where kept."""

    offset_s: float
    seconds: int
    path: Path


@dataclass
class _Component:
    endpoint: Endpoint
    pieces: list[_Piece] = field(default_factory=list)
    heap: _Piece | None = None
    failures: list[str] = field(default_factory=list)
    cpu: bool = True  # False: only its heap is taken (ProfileSettings.apiserver_cpu_skipped)
    current: Fetch | None = None
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class ProfileProbe:
    """A step's profiles behind the Probe protocol (measure/probes.py): CPU profiling starts with the window, the
    heap is taken when it closes, and the files are read into step.profiles after the end scrape."""

    def __init__(self, info: TargetInfo, settings: ProfileSettings, opened: float | None = None) -> None:
        self.settings = settings
        found, self.missing = endpoints(info)
        skipped = settings.apiserver_cpu_skipped
        self.components = [_Component(endpoint, cpu=not skipped or endpoint.component == analysis.ETCD)
                           for endpoint in found]
        self.origin = opened if opened is not None else time.monotonic()
        self._closing = threading.Event()
        self._abandoned = False

    # -- the Probe protocol -------------------------------------------------------------------------------
    def start(self) -> None:
        self.settings.folder.mkdir(parents=True, exist_ok=True)
        for component in self.components:
            if not component.cpu:
                component.failures.append(f"cpu: {self.settings.apiserver_cpu_skipped}")
                continue
            component.thread = threading.Thread(target=self._profile_cpu, args=(component,), daemon=True,
                                                name=f"profile-{component.endpoint.component}")
            component.thread.start()

    def close(self) -> None:
        """The window closes: a plain step's profiles are waited for (they end with it); a phase's piece under way
        is cut off. Then the heap of each, still inside the window."""
        self._closing.set()
        for component in self.components:
            if component.thread is None:
                continue
            if not self.settings.fixed:
                with component.lock:
                    if component.current is not None:
                        component.current.cut()
            component.thread.join(timeout=self._left_s() + GRACE_S)
            if component.thread.is_alive():
                component.failures.append("cpu: no answer in time")
        for component in self.components:
            self._take_heap(component)
        self._abandoned = True  # a late answer is kept by no one

    def fill(self, step: StepResult, notes: list[str]) -> None:
        failures = list(self.missing)
        for component in self.components:
            name = component.endpoint.component
            failures += [f"{name} {failure}" for failure in component.failures]
            with component.lock:
                pieces, heap = list(component.pieces), component.heap
            if pieces:
                found = self._summary(name, "cpu", pieces, failures)
                if found is not None:
                    step.profiles.append(found)
            elif not any(f.startswith("cpu") for f in component.failures):
                failures.append(f"{name} cpu: the window ended before a profile of {self._first_seconds()} s did")
            if heap is not None:
                found = self._summary(name, "heap", [heap], failures)
                if found is not None:
                    step.profiles.append(found)
        if failures:
            notes.append("not profiled: " + "; ".join(failures))

    def stop(self) -> None:
        """An aborted window: cut every request under way, keep nothing."""
        self._abandoned = True
        self._closing.set()
        for component in self.components:
            with component.lock:
                if component.current is not None:
                    component.current.cut()

    def requests(self) -> Mapping[tuple[str, str], int]:
        return {}  # /debug/pprof is no resource: no request count of the step includes them

    def add(self, component: str, pids: Iterable[int]) -> None:
        pass

    # -- CPU ----------------------------------------------------------------------------------------------
    def _elapsed_s(self) -> float:
        return time.monotonic() - self.origin

    def _left_s(self) -> float:
        """Seconds until the CPU profile under way should have answered (0 when none is due)."""
        return max(0.0, self.settings.window_s - self._elapsed_s()) if self.settings.fixed else CHUNK_S

    def _first_seconds(self) -> int:
        window = math.floor(self.settings.window_s)
        return min(window, self.settings.cpu_max_s) if self.settings.fixed else min(CHUNK_S, window,
                                                                                  self.settings.cpu_max_s)

    def _profile_cpu(self, component: _Component) -> None:
        settings = self.settings
        if settings.fixed:
            seconds = self._first_seconds()
            if seconds < MIN_CPU_S:
                component.failures.append(f"cpu: the window ({settings.window_s:g} s) is shorter than a second")
                return
            # the last `seconds` of the window: wait for its start (the close() of an early end wakes this)
            if self._closing.wait(max(0.0, settings.window_s - seconds - self._elapsed_s())):
                return
            self._cpu_piece(component, seconds, f"{component.endpoint.component}.cpu.pb.gz")
            return
        done, number = 0, 1
        while not self._closing.is_set() and done < settings.cpu_max_s:
            seconds = min(CHUNK_S, settings.cpu_max_s - done, math.floor(settings.window_s - self._elapsed_s()))
            if seconds < MIN_CPU_S:
                return
            if not self._cpu_piece(component, seconds, f"{component.endpoint.component}.cpu.{number}.pb.gz"):
                return
            done += seconds
            number += 1

    def _cpu_piece(self, component: _Component, seconds: int, name: str) -> bool:
        """One CPU profile of `seconds`, kept as `name`; whether it was (a failure is recorded)."""
        fetch = Fetch(component.endpoint, f"/debug/pprof/profile?seconds={seconds}", seconds + GRACE_S)
        with component.lock:  # close() cuts what is current once it has said the window closes
            if self._closing.is_set() and not self.settings.fixed:
                return False
            component.current = fetch
        began = self._elapsed_s()
        try:
            body = fetch.get()
        except (*TRANSPORT_ERRORS, OSError) as error:
            if not self._closing.is_set() or self.settings.fixed:
                component.failures.append(f"cpu: {short_error(error)}")
            return False
        finally:
            with component.lock:
                component.current = None
        if self._abandoned or (not self.settings.fixed and self._closing.is_set()):
            return False  # it ended after the window closed: not the window's
        path = self.settings.folder / name
        path.write_bytes(body)
        with component.lock:
            component.pieces.append(_Piece(round(began, 3), seconds, path))
        return True

    # -- heap ---------------------------------------------------------------------------------------------
    def _take_heap(self, component: _Component) -> None:
        name = component.endpoint.component
        began = self._elapsed_s()
        try:
            body = Fetch(component.endpoint, "/debug/pprof/heap", HEAP_TIMEOUT_S).get()
        except (*TRANSPORT_ERRORS, OSError) as error:
            component.failures.append(f"heap: {short_error(error)}")
            return
        path = self.settings.folder / f"{name}.heap.pb.gz"
        path.write_bytes(body)
        component.heap = _Piece(round(began, 3), 0, path)

    # -- results ------------------------------------------------------------------------------------------
    def _summary(self, component: str, kind: str, pieces: list[_Piece],
                 failures: list[str]) -> ComponentProfile | None:
        try:
            decoded = [analysis.decode(piece.path.read_bytes()) for piece in pieces]
            files = [self._relative(piece.path) for piece in pieces]
            return analysis.summarise(decoded, component, kind, files, offset_s=pieces[0].offset_s,
                                      seconds=float(sum(p.seconds for p in pieces)) if kind == "cpu" else None)
        except (analysis.ProfileError, OSError) as error:
            failures.append(f"{component} {kind}: unreadable ({error})")
            return None

    def _relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.settings.run_folder).as_posix()
        except ValueError:
            return path.as_posix()
