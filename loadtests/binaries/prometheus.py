"""Prometheus and promtool in the binary cache, for plans with `prometheus: {enabled: true}`.

They come from Debian's `prometheus` package, fetched with `apt-get download` (a package registry is reachable
where the internet is not) and unpacked with `dpkg -x`: nothing is installed on the machine, no service is
started, and the two binaries (which need only libc) land in the cache as every other set does. Where that cannot
be done, setup says so in one line and goes on: only plans that ask for a Prometheus need it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadtests.binaries.cache import BinarySet, cache_root
from loadtests.config.versions import PROMETHEUS_VERSION
from loadtests.errors import SetupError

PROMETHEUS_BINARIES = ("prometheus", "promtool")
PACKAGE = "prometheus"
APT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class PrometheusBinaries:
    prometheus: Path
    promtool: Path
    version: str = PROMETHEUS_VERSION


def prometheus_set() -> BinarySet:
    return BinarySet("prometheus", PROMETHEUS_VERSION, PROMETHEUS_BINARIES)


def _run(argv: list[str], cwd: Path) -> str:
    """A packaging command's output, or a SetupError with its last line of complaint."""
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=APT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SetupError(f"{argv[0]}: {error}") from None
    if done.returncode != 0:
        said = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise SetupError(f"`{' '.join(argv)}` failed: {said[-1] if said else f'exit {done.returncode}'}")
    return done.stdout


def debian_version(cwd: Path) -> str:
    """The version of Debian's prometheus package apt would fetch, checked against the pinned one."""
    shown = _run(["apt-cache", "show", "--no-all-versions", PACKAGE], cwd)
    found = next((line.split(":", 1)[1].strip() for line in shown.splitlines() if line.startswith("Version:")), "")
    upstream = found.split(":", 1)[-1].split("+")[0].split("-")[0]
    if upstream != PROMETHEUS_VERSION:
        raise SetupError(f"Debian's {PACKAGE} package here is {found or 'not known'}, not {PROMETHEUS_VERSION}")
    return found


def from_debian(binary_set: BinarySet, staging: Path, log: Callable[[str], None]) -> str:
    """The set's binaries from Debian's package into `staging`: downloaded, unpacked, the rest thrown away."""
    for tool in ("apt-get", "apt-cache", "dpkg"):
        if shutil.which(tool) is None:
            raise SetupError(f"{tool} not found (not a Debian-based machine)")
    unpacked = staging / "deb"
    unpacked.mkdir()
    version = debian_version(unpacked)
    log(f"{binary_set.name} {binary_set.version}: fetching Debian's {PACKAGE} {version} (apt-get download)")
    _run(["apt-get", "download", f"{PACKAGE}={version}"], unpacked)
    debs = sorted(unpacked.glob("*.deb"))
    if not debs:
        raise SetupError(f"apt-get download left no .deb in {unpacked}")
    _run(["dpkg", "-x", str(debs[0]), str(unpacked / "root")], unpacked)
    for binary in binary_set.binaries:
        found = unpacked / "root" / "usr" / "bin" / binary
        if not found.is_file():
            raise SetupError(f"Debian's {PACKAGE} {version} holds no usr/bin/{binary}")
        shutil.move(found, staging / binary)
    shutil.rmtree(unpacked)
    return "Debian's package"


def provide_prometheus(log: Callable[[str], None] = print) -> bool:
    """Prometheus in the cache, or one line saying why not and what it costs (plans asking for it cannot run)."""
    from loadtests.binaries.provide import provide_set

    try:
        provide_set(prometheus_set(), {}, log, fetch=from_debian)
    except (SetupError, OSError) as error:
        log(f"prometheus {PROMETHEUS_VERSION}: not provided ({error}); plans with `prometheus: {{enabled: true}}` "
            f"need it: install Debian's {PACKAGE} package's binaries into {prometheus_set().directory}")
        return False
    return True


def find_prometheus() -> PrometheusBinaries:
    """The cached prometheus and promtool, or a SetupError saying how to provide them."""
    found = prometheus_set()
    if not found.is_cached():
        raise SetupError(f"prometheus {PROMETHEUS_VERSION} missing from {cache_root()}/bin (a plan with "
                         "`prometheus: {enabled: true}` needs it); run: make setup")
    return PrometheusBinaries(found.path("prometheus"), found.path("promtool"))
