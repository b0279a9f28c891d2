"""The per-version cache of control-plane binaries, outside the repository and shared by every clone: where
a set lives, whether it is complete, and finding a provided version.

A finished set is moved into the cache in one rename, so a half-built set is never used."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from loadtests.config.versions import (
    DEFAULT_KUBE_VERSION,
    ETCD_VERSION,
    KWOK_VERSION,
    check_kube_version,
)
from loadtests.errors import SetupError

KUBE_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")


ETCD_BINARIES = ("etcd",)


KWOK_BINARIES = ("kwok", "kwokctl")


KUBEMARK_BINARIES = ("kubemark",)


COMPLETE_MARKER = ".provided.json"


def cache_root() -> Path:
    """Where binaries live between runs: outside the repository, shared by every clone."""
    env = os.environ.get("LOADTEST_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "k8s-loadtest"


def cache_folder(path: Path) -> Path:
    """`path` (a folder under the cache) made, or one line saying why it cannot be and, when LOADTEST_CACHE put
    it there, that the variable names it: an unwritable cache is the user's setting, not a crash."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        named = ("; LOADTEST_CACHE names it: point it at a folder you can write, or unset it"
                 if os.environ.get("LOADTEST_CACHE") else "")
        raise SetupError(f"cache folder {path}: cannot create it ({error.strerror or error}){named}") from None
    return path


def machine_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)


@dataclass(frozen=True)
class BinarySet:
    """A group of binaries that is provided (downloaded or built) as one unit."""

    name: str  # "kube", "etcd", "kwok" or "kubemark"
    version: str
    binaries: tuple[str, ...]

    @property
    def directory(self) -> Path:
        return cache_root() / "bin" / f"{self.name}-{self.version}"

    def path(self, binary: str) -> Path:
        return self.directory / binary

    def is_cached(self) -> bool:
        marker = self.directory / COMPLETE_MARKER
        return marker.is_file() and all(os.access(self.path(b), os.X_OK) for b in self.binaries)

    def source(self) -> str:
        """How the cached set was obtained ("download" or "build"), as recorded when it was provided."""
        try:
            return json.loads((self.directory / COMPLETE_MARKER).read_text())["source"]
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


def hollow_node_set(kube_version: str) -> BinarySet:
    """kubemark (the hollow node: a real kubelet or kube-proxy on a fake runtime) at the kube version. Not one of
    `sets_for`: a run does not need it; `loadtest setup --hollow-node` and benchmarks/hollow_node.py provide it."""
    return BinarySet("kubemark", kube_version, KUBEMARK_BINARIES)


def find_kubemark(kube_version: str = DEFAULT_KUBE_VERSION) -> Path:
    """The cached kubemark binary for a version, or a SetupError that says how to provide it."""
    check_kube_version(kube_version)
    kubemark = hollow_node_set(kube_version)
    if not kubemark.is_cached():
        raise SetupError(f"kubemark {kube_version} missing from {cache_root()}/bin; run: .venv/bin/loadtest setup "
                         f"--hollow-node --kube-version {kube_version}")
    return kubemark.path("kubemark")


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
