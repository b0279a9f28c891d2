"""Provide pinned control-plane binaries: from a per-version cache, a release download, or a Go build.

Machines without internet (CI here) can still reach the Go module proxy, so every binary can be built from
its Go module. A finished set is moved into the cache in one rename, so a half-built set is never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadtests.errors import SetupError

# The one place versions are pinned. KUBE_VERSION may be overridden per call (upgrade rehearsals need two).
DEFAULT_KUBE_VERSION = "v1.37.2"
PREVIOUS_KUBE_VERSION = "v1.36.3"  # the "from" side of upgrade rehearsals in the test suite and README
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
MIN_KUBE_MINOR = 30  # the SLI histograms and the flags used here exist from 1.30 on

KUBE_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
ETCD_BINARIES = ("etcd",)
KWOK_BINARIES = ("kwok", "kwokctl")

DOWNLOAD_TIMEOUT_S = 15.0
_VERSION_RE = re.compile(r"^v1\.(\d+)\.(\d+)$")
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


def check_kube_version(version: str) -> str:
    """Refuse a malformed or unsupported Kubernetes version with one line that says what to pass instead."""
    match = _VERSION_RE.match(version or "")
    if not match:
        raise SetupError(
            f"Kubernetes version {version!r} is not of the form v1.MINOR.PATCH (for example {DEFAULT_KUBE_VERSION})"
        )
    if int(match.group(1)) < MIN_KUBE_MINOR:
        raise SetupError(
            f"Kubernetes version {version} is too old for this harness; use v1.{MIN_KUBE_MINOR}.0 or newer"
        )
    return version


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
    full_env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod", **(env or {})}
    result = subprocess.run(
        ["go", *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise SetupError(f"`go {' '.join(args[:3])} ...` failed in {cwd}:\n{tail}")
    return result.stdout


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
    return [v for v in result.stdout.split()[1:] if _VERSION_RE.match(v)]


def _wrapper_module(directory: Path, name: str, requires: list[str], replaces: list[str], tools: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"module loadtest.local/{name}", "", "go 1.26.0", "", "require ("]
    lines += [f"\t{r}" for r in requires] + [")", "", "replace ("]
    lines += [f"\t{r}" for r in replaces] + [")", ""]
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
    log(f"kube {version}: compiling {', '.join(binary_set.binaries)} (about 15-30 minutes on 2 cores)")
    _go(["build", "-trimpath", "-tags=notest", "-ldflags", " ".join(ldflags), "-o", str(dest) + "/", *packages],
        work, log)


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
    _go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(dest / "etcd"), "go.etcd.io/etcd/server/v3"],
        work, log)


def _build_kwok(binary_set: BinarySet, dest: Path, log: Callable[[str], None]) -> None:
    version = binary_set.version
    ldflags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={version}"
    log(f"kwok {version}: building kwok and kwokctl")
    _go(
        ["install", "-trimpath", "-ldflags", ldflags,
         *(f"sigs.k8s.io/kwok/cmd/{b}@{version}" for b in binary_set.binaries)],
        cache_root(), log, env={"GOBIN": str(dest), "GOFLAGS": ""},
    )


BUILDERS: dict[str, Callable[[BinarySet, Path, Callable[[str], None]], None]] = {
    "kube": _build_kube,
    "etcd": _build_etcd,
    "kwok": _build_kwok,
}
