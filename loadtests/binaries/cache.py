"""Provide pinned control-plane binaries: from a per-version cache, a release download, or a Go build.

Machines without internet (CI here) can still reach the Go module proxy, so every binary can be built from
its Go module. A finished set is moved into the cache in one rename, so a half-built set is never used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadtests.config.versions import (  # noqa: F401 - re-exported: callers name versions through this module too
    DEFAULT_KUBE_VERSION,
    ETCD_VERSION,
    KWOK_VERSION,
    PREVIOUS_KUBE_VERSION,
    VERSION_RE,
    check_kube_version,
)
from loadtests.errors import SetupError

# The versions are pinned in loadtests/config/versions.py; KUBE_VERSION may be overridden per call (upgrade rehearsals
# need two).

KUBE_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
ETCD_BINARIES = ("etcd",)
KWOK_BINARIES = ("kwok", "kwokctl")

DOWNLOAD_TIMEOUT_S = 15.0
_COMPLETE_MARKER = ".provided.json"


def cache_root() -> Path:
    """Where binaries live between runs: outside the repository, shared by every clone."""
    env = os.environ.get("LOADTEST_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "k8s-loadtest"


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)


@dataclass(frozen=True)
class BinarySet:
    """A group of binaries that is provided (downloaded or built) as one unit."""

    name: str  # "kube", "etcd" or "kwok"
    version: str
    binaries: tuple[str, ...]

    @property
    def directory(self) -> Path:
        return cache_root() / "bin" / f"{self.name}-{self.version}"

    def path(self, binary: str) -> Path:
        return self.directory / binary

    def is_cached(self) -> bool:
        marker = self.directory / _COMPLETE_MARKER
        return marker.is_file() and all(os.access(self.path(b), os.X_OK) for b in self.binaries)

    def source(self) -> str:
        """How the cached set was obtained ("download" or "build"), as recorded when it was provided."""
        try:
            return json.loads((self.directory / _COMPLETE_MARKER).read_text())["source"]
        except (OSError, ValueError, KeyError):
            return "unknown"


@dataclass(frozen=True)
class Binaries:
    """Paths to one complete set of control-plane binaries."""

    kube_version: str
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kube_controller_manager: Path
    kwok: Path
    kwokctl: Path

    def versions(self) -> dict[str, str]:
        return {"kubernetes": self.kube_version, "etcd": ETCD_VERSION, "kwok": KWOK_VERSION}


def sets_for(kube_version: str) -> list[BinarySet]:
    return [
        BinarySet("etcd", ETCD_VERSION, ETCD_BINARIES),
        BinarySet("kwok", KWOK_VERSION, KWOK_BINARIES),
        BinarySet("kube", kube_version, KUBE_BINARIES),
    ]


def find(kube_version: str = DEFAULT_KUBE_VERSION) -> Binaries:
    """The cached binaries for a version, or a SetupError that says to run setup."""
    check_kube_version(kube_version)
    etcd, kwok, kube = sets_for(kube_version)
    missing = [s for s in (etcd, kwok, kube) if not s.is_cached()]
    if missing:
        names = ", ".join(f"{s.name} {s.version}" for s in missing)
        raise SetupError(
            f"control-plane binaries missing from {cache_root()}/bin ({names}); "
            f"run: make setup KUBE_VERSION={kube_version}"
        )
    return Binaries(
        kube_version=kube_version,
        etcd=etcd.path("etcd"),
        kube_apiserver=kube.path("kube-apiserver"),
        kube_scheduler=kube.path("kube-scheduler"),
        kube_controller_manager=kube.path("kube-controller-manager"),
        kwok=kwok.path("kwok"),
        kwokctl=kwok.path("kwokctl"),
    )


def provide(
    kube_version: str = DEFAULT_KUBE_VERSION,
    *,
    download_base: dict[str, str] | None = None,
    log: Callable[[str], None] = print,
) -> Binaries:
    """Make sure every binary for kube_version is in the cache: cache, then download, then build."""
    check_kube_version(kube_version)
    if not BinarySet("kube", kube_version, KUBE_BINARIES).is_cached():
        known = known_kube_versions()
        if known and kube_version not in known:
            newest = ", ".join(known[-4:])
            raise SetupError(f"Kubernetes {kube_version} is not a published release; the newest are: {newest}")
    for binary_set in sets_for(kube_version):
        if binary_set.is_cached():
            log(f"{binary_set.name} {binary_set.version}: cached in {binary_set.directory}")
            continue
        started = time.monotonic()
        source = _provide_set(binary_set, download_base or {}, log)
        log(
            f"{binary_set.name} {binary_set.version}: {source} into {binary_set.directory} "
            f"in {time.monotonic() - started:.0f} s"
        )
    return find(kube_version)


def _provide_set(binary_set: BinarySet, download_base: dict[str, str], log: Callable[[str], None]) -> str:
    binary_set.directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{binary_set.name}-", dir=binary_set.directory.parent))
    try:
        try:
            _download_set(binary_set, staging, download_base.get(binary_set.name))
            source = "download"
        except (OSError, urllib.error.URLError, ValueError) as download_error:
            reason = getattr(download_error, "reason", download_error)
            log(f"{binary_set.name} {binary_set.version}: download not possible ({reason}); building from Go modules")
            _require_go(binary_set, reason)
            BUILDERS[binary_set.name](binary_set, staging, log)
            source = "build"
        for binary in binary_set.binaries:
            if not os.access(staging / binary, os.X_OK):
                raise SetupError(f"{binary_set.name} {binary_set.version}: {binary} was not produced in {staging}")
        (staging / _COMPLETE_MARKER).write_text(
            json.dumps({"source": source, "version": binary_set.version, "at": time.time()})
        )
        if binary_set.directory.exists():
            shutil.rmtree(binary_set.directory)
        staging.rename(binary_set.directory)
        return source
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- download

_RELEASE_BASE = {
    "kube": "https://dl.k8s.io/release",
    "etcd": "https://github.com/etcd-io/etcd/releases/download",
    "kwok": "https://github.com/kubernetes-sigs/kwok/releases/download",
}


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:  # noqa: S310 - fixed https bases
        return response.read()


def _download_set(binary_set: BinarySet, dest: Path, base: str | None) -> None:
    if os.environ.get("LOADTEST_OFFLINE"):
        raise OSError("not attempted: LOADTEST_OFFLINE is set")
    base = (base or _RELEASE_BASE[binary_set.name]).rstrip("/")
    arch, version = _arch(), binary_set.version
    if binary_set.name == "kube":
        for binary in binary_set.binaries:
            url = f"{base}/{version}/bin/linux/{arch}/{binary}"
            data = _fetch(url)
            expected = _fetch(url + ".sha256").decode().split()[0]
            if hashlib.sha256(data).hexdigest() != expected:
                raise ValueError(f"checksum mismatch for {url}")
            _write_executable(dest / binary, data)
    elif binary_set.name == "etcd":
        archive = f"etcd-{version}-linux-{arch}.tar.gz"
        data = _fetch(f"{base}/{version}/{archive}")
        sums = _fetch(f"{base}/{version}/SHA256SUMS").decode()
        if f"{hashlib.sha256(data).hexdigest()}  {archive}" not in sums:
            raise ValueError(f"checksum mismatch for {archive}")
        with tempfile.TemporaryFile() as tmp:
            tmp.write(data)
            tmp.seek(0)
            with tarfile.open(fileobj=tmp) as tar:
                member = tar.getmember(f"etcd-{version}-linux-{arch}/etcd")
                extracted = tar.extractfile(member)
                assert extracted is not None
                _write_executable(dest / "etcd", extracted.read())
    else:
        for binary in binary_set.binaries:
            _write_executable(dest / binary, _fetch(f"{base}/{version}/{binary}-linux-{arch}"))


def _write_executable(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o755)


# ---------------------------------------------------------------------------------------------- build


def _require_go(binary_set: BinarySet, download_reason: object) -> None:
    if shutil.which("go") is None:
        raise SetupError(
            f"cannot provide {binary_set.name} {binary_set.version}: the download failed ({download_reason}) "
            "and there is no Go toolchain to build it; install Go 1.26 or newer (https://go.dev/dl/) "
            f"or put the binaries in {binary_set.directory}"
        )


def _go(args: list[str], cwd: Path, log: Callable[[str], None], env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["go", *args], cwd=cwd, env=_go_env(env), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise SetupError(f"`go {' '.join(args[:3])} ...` failed in {cwd}:\n{tail}")
    return result.stdout


# ---------------------------------------------------------------------------------------------- build progress
# A first build compiles a few thousand packages for 10+ minutes; without these lines setup looks hung.

PROGRESS_INTERVAL_S = 12.0
_MIN_DONE_FOR_ESTIMATE = 20  # below this (or 2% of the total) the pace says little: the first packages are small
_PACKAGE_LINE = re.compile(r"[\w.~+-]+(/[\w.~+-]+)*")  # what `go build -v` prints per package, when go list failed
_IN_BUILD_CACHE = "not installed but available in build cache"  # a `go list` StaleReason: nothing to compile


@dataclass(frozen=True)
class BuildScope:
    """What `go list -deps` says a build involves: every package, and how many of them need compiling."""

    packages: frozenset[str]
    to_compile: int  # an upper bound: a package stale only through a dependency may still come from the cache


def parse_go_list(output: str) -> BuildScope:
    """Read `go list -deps -f '{{.ImportPath}}\\t{{.Stale}}\\t{{.StaleReason}}'` output."""
    packages, to_compile = set(), 0
    for line in output.splitlines():
        path, _, rest = line.partition("\t")
        if not path.strip():
            continue
        packages.add(path.strip())
        stale, _, reason = rest.partition("\t")
        if stale.strip() == "true" and reason.strip() != _IN_BUILD_CACHE:
            to_compile += 1
    return BuildScope(frozenset(packages), to_compile)


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def estimate_remaining_s(done: int, total: int | None, elapsed_s: float) -> float | None:
    """Seconds left if the rest compiles at the pace so far; None while the pace means nothing yet."""
    if not total or done >= total or elapsed_s <= 0 or done < max(_MIN_DONE_FOR_ESTIMATE, total // 50):
        return None
    return elapsed_s / done * (total - done)


def progress_line(label: str, done: int, total: int | None, elapsed_s: float) -> str:
    """One line of build progress: packages compiled so far, time spent, and roughly how long is left."""
    elapsed = format_duration(elapsed_s)
    if total is None:
        return f"{label}: {done} packages compiled, {elapsed} elapsed"
    if done >= total:
        return f"{label}: {done} packages compiled, {elapsed} elapsed; linking"
    share = f"{done}/{total} packages compiled ({100 * done // total}%), {elapsed} elapsed"
    remaining = estimate_remaining_s(done, total, elapsed_s)
    if remaining is None:
        left = "estimating time left"
    else:
        left = "almost done" if remaining < 5 else f"about {format_duration(remaining)} left"
    return f"{label}: {share}, {left}"


def scope_line(label: str, scope: BuildScope | None) -> str:
    """The line before a build: how much of it needs compiling (the rest is in Go's build cache)."""
    if scope is None:
        return f"{label}: compiling (package count unknown)"
    cached = len(scope.packages) - scope.to_compile
    if scope.to_compile == 0:
        return f"{label}: all {len(scope.packages)} packages are in Go's build cache; linking only"
    return (f"{label}: up to {scope.to_compile} of {len(scope.packages)} packages to compile "
            f"({cached} in Go's build cache); progress every {PROGRESS_INTERVAL_S:.0f} s")


def run_counting(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    counts: Callable[[str], bool],
    tick: Callable[[int, float], None],
    interval_s: float = PROGRESS_INTERVAL_S,
) -> tuple[int, list[str]]:
    """Run argv, counting output lines that `counts` accepts and calling tick(count, elapsed) every interval_s.

    Returns the exit code and the last lines that were not counted (the ones worth showing on failure).
    """
    started = time.monotonic()
    done = 0
    others: deque[str] = deque(maxlen=40)
    proc = subprocess.Popen(  # noqa: S603 - argv built here from fixed tool names
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace",
        start_new_session=True,  # its own process group, so an interrupt can stop the compilers go started too
    )

    def read() -> None:
        nonlocal done
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            if counts(line):
                done += 1
            elif line.strip():
                others.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while True:
            try:
                proc.wait(timeout=interval_s)
                break
            except subprocess.TimeoutExpired:
                tick(done, time.monotonic() - started)
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM): leave no compiler running
            _stop_group(proc)
        reader.join(timeout=5)
    return proc.returncode, list(others)


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """Stop a child started in its own session and everything in its process group: politely, then for sure."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _go_env(env: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod", **(env or {})}


def _build_scope(flags: list[str], packages: list[str], cwd: Path, env: dict[str, str]) -> BuildScope | None:
    """Ask `go list` with the build's own flags and env (they decide what is cached); None if it cannot say."""
    result = subprocess.run(
        ["go", "list", "-deps", *flags, "-f", "{{.ImportPath}}\t{{.Stale}}\t{{.StaleReason}}", *packages],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        return None
    scope = parse_go_list(result.stdout)
    return scope if scope.packages else None


def _go_build(label: str, flags: list[str], packages: list[str], output: str, cwd: Path,
              log: Callable[[str], None]) -> None:
    """`go build -v` with a progress line every PROGRESS_INTERVAL_S; -v names each package as it is compiled."""
    env = _go_env()
    scope = _build_scope(flags, packages, cwd, env)
    log(scope_line(label, scope))
    total = scope.to_compile if scope else None
    code, others = run_counting(
        ["go", "build", "-v", *flags, "-o", output, *packages], cwd, env,
        counts=(lambda line: line in scope.packages) if scope else (lambda line: bool(_PACKAGE_LINE.fullmatch(line))),
        tick=lambda done, elapsed: log(progress_line(label, done, total, elapsed)),
        interval_s=PROGRESS_INTERVAL_S,
    )
    if code != 0:
        tail = "\n".join(others[-15:])
        raise SetupError(f"`go build` of {label} failed in {cwd}:\n{tail}")


def _module_gomod(module: str, version: str, cwd: Path, log: Callable[[str], None]) -> str:
    """The go.mod text of a published module version, via the module proxy."""
    try:
        out = _go(["mod", "download", "-json", f"{module}@{version}"], cwd, log)
    except SetupError as error:
        if "unknown revision" in str(error) or "invalid version" in str(error) or "not found" in str(error):
            raise SetupError(f"{module} {version} is not published; check the version (see `go list -m -versions "
                             f"{module}`)") from error
        raise
    return Path(json.loads(out)["GoMod"]).read_text()


def known_kube_versions() -> list[str]:
    """Released Kubernetes versions the module proxy knows, oldest first (empty when it cannot be asked)."""
    if shutil.which("go") is None:
        return []
    result = subprocess.run(
        ["go", "list", "-m", "-versions", "k8s.io/kubernetes"],
        capture_output=True, text=True, check=False, cwd=tempfile.gettempdir(),
    )
    if result.returncode != 0:
        return []
    return [v for v in result.stdout.split()[1:] if VERSION_RE.match(v)]


def _wrapper_module(directory: Path, name: str, requires: list[str], replaces: list[str], tools: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"module loadtest.local/{name}", "", "go 1.26.0", "", "require ("]
    lines += [f"\t{r}" for r in requires] + [")", ""]
    if replaces:
        lines += ["replace ("] + [f"\t{r}" for r in replaces] + [")", ""]
    if tools:
        lines += ["tool ("] + [f"\t{t}" for t in tools] + [")", ""]
    (directory / "go.mod").write_text("\n".join(lines))
    (directory / "go.sum").unlink(missing_ok=True)


def _build_kube(binary_set: BinarySet, dest: Path, log: Callable[[str], None]) -> None:
    version = binary_set.version
    work = cache_root() / "build" / f"kube-{version}"
    work.mkdir(parents=True, exist_ok=True)
    gomod = _module_gomod("k8s.io/kubernetes", version, work, log)
    staging_version = "v0." + version.removeprefix("v1.")
    staging = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", gomod, flags=re.MULTILINE)
    packages = [f"k8s.io/kubernetes/cmd/{b}" for b in binary_set.binaries]
    _wrapper_module(
        work,
        "kubebuild",
        requires=[f"k8s.io/kubernetes {version}"],
        replaces=[f"{m} => {m} {staging_version}" for m in staging],
        tools=packages,
    )
    log(f"kube {version}: resolving modules (go mod tidy)")
    _go(["mod", "tidy"], work, log)
    major, minor = version.removeprefix("v").split(".")[:2]
    ldflags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        ldflags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    log(f"kube {version}: compiling {', '.join(binary_set.binaries)} (minutes on 2 cores; the progress lines "
        "estimate what is left)")
    _go_build(f"kube {version}", ["-trimpath", "-tags=notest", "-ldflags", " ".join(ldflags)], packages,
              str(dest) + "/", work, log)


def _build_etcd(binary_set: BinarySet, dest: Path, log: Callable[[str], None]) -> None:
    version = binary_set.version
    work = cache_root() / "build" / f"etcd-{version}"
    gomod = _module_gomod("go.etcd.io/etcd/server/v3", version, cache_root(), log)
    local = re.findall(r"^\s*(go\.etcd\.io/etcd/[\w./-]+)\s*=>\s*\.\./", gomod, flags=re.MULTILINE)
    _wrapper_module(
        work,
        "etcdbuild",
        requires=[f"go.etcd.io/etcd/server/v3 {version}"],
        replaces=[f"{m} => {m} {version}" for m in local],
        tools=["go.etcd.io/etcd/server/v3"],
    )
    log(f"etcd {version}: building")
    _go(["mod", "tidy"], work, log)
    _go_build(f"etcd {version}", ["-trimpath", "-ldflags", "-s -w"], ["go.etcd.io/etcd/server/v3"],
              str(dest / "etcd"), work, log)


def _build_kwok(binary_set: BinarySet, dest: Path, log: Callable[[str], None]) -> None:
    # A wrapper module (not `go install pkg@version`) so that `go list` can count the packages for the progress
    # lines; kwok's go.mod has no replace directives, so the selected dependency versions are the same.
    version = binary_set.version
    work = cache_root() / "build" / f"kwok-{version}"
    packages = [f"sigs.k8s.io/kwok/cmd/{b}" for b in binary_set.binaries]
    _wrapper_module(work, "kwokbuild", requires=[f"sigs.k8s.io/kwok {version}"], replaces=[], tools=packages)
    log(f"kwok {version}: building kwok and kwokctl")
    _go(["mod", "tidy"], work, log)
    ldflags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={version}"
    _go_build(f"kwok {version}", ["-trimpath", "-ldflags", ldflags], packages, str(dest) + "/", work, log)


BUILDERS: dict[str, Callable[[BinarySet, Path, Callable[[str], None]], None]] = {
    "kube": _build_kube,
    "etcd": _build_etcd,
    "kwok": _build_kwok,
}
