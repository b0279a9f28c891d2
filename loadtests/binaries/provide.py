"""Provide pinned control-plane binaries: from the per-version cache, a release download, or a Go build.

Machines without internet (CI here) can still reach the Go module proxy, so every binary can be built from
its Go module."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from loadtests.binaries.build import BUILDERS, known_kube_versions, require_go
from loadtests.binaries.cache import (
    COMPLETE_MARKER,
    KUBE_BINARIES,
    Binaries,
    BinarySet,
    cache_folder,
    find,
    find_kubemark,
    hollow_node_set,
    sets_for,
)
from loadtests.binaries.download import download_set, downloadable
from loadtests.config.versions import (
    DEFAULT_KUBE_VERSION,
    check_kube_version,
)
from loadtests.errors import SetupError


def provide(
    kube_version: str = DEFAULT_KUBE_VERSION,
    *,
    download_base: dict[str, str] | None = None,
    log: Callable[[str], None] = print,
) -> Binaries:
    """Make sure every binary for kube_version is in the cache: cache, then download, then build."""
    check_kube_version(kube_version)
    if not BinarySet("kube", kube_version, KUBE_BINARIES).is_cached():
        _check_published(kube_version)
    for binary_set in sets_for(kube_version):
        provide_set(binary_set, download_base or {}, log)
    return find(kube_version)


def provide_hollow_node(kube_version: str = DEFAULT_KUBE_VERSION, *, log: Callable[[str], None] = print) -> Path:
    """kubemark at kube_version, from the cache or built (it is no release download); its path."""
    check_kube_version(kube_version)
    kubemark = hollow_node_set(kube_version)
    if not kubemark.is_cached():
        _check_published(kube_version)
    provide_set(kubemark, {}, log)
    return find_kubemark(kube_version)


def _check_published(kube_version: str) -> None:
    known = known_kube_versions()
    if known and kube_version not in known:
        newest = ", ".join(known[-4:])
        raise SetupError(f"Kubernetes {kube_version} is not a published release; the newest are: {newest}")


# How a set's binaries get into its staging folder: (set, staging, log) -> where they came from, in a word
Fetch = Callable[[BinarySet, Path, Callable[[str], None]], str]


def provide_set(binary_set: BinarySet, download_base: dict[str, str], log: Callable[[str], None],
                fetch: Fetch | None = None) -> None:
    """One set into the cache unless it is there already, saying where from and how long it took; `fetch`: how
    its binaries are had (default: a release download, else a Go build)."""
    if binary_set.is_cached():
        log(f"{binary_set.name} {binary_set.version}: cached in {binary_set.directory}")
        return
    started = time.monotonic()
    fetch = fetch or (lambda found, staging, said: _download_or_build(found, staging, download_base, said))
    source = _provide_set(binary_set, fetch, log)
    log(
        f"{binary_set.name} {binary_set.version}: {source} into {binary_set.directory} "
        f"in {time.monotonic() - started:.0f} s"
    )


def _provide_set(binary_set: BinarySet, fetch: Fetch, log: Callable[[str], None]) -> str:
    cache_folder(binary_set.directory.parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{binary_set.name}-", dir=binary_set.directory.parent))
    try:
        source = fetch(binary_set, staging, log)
        for binary in binary_set.binaries:
            if not os.access(staging / binary, os.X_OK):
                raise SetupError(f"{binary_set.name} {binary_set.version}: {binary} was not produced in {staging}")
        (staging / COMPLETE_MARKER).write_text(
            json.dumps({"source": source, "version": binary_set.version, "at": time.time()})
        )
        if binary_set.directory.exists():
            shutil.rmtree(binary_set.directory)
        staging.rename(binary_set.directory)
        return source
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _download_or_build(binary_set: BinarySet, staging: Path, download_base: dict[str, str],
                       log: Callable[[str], None]) -> str:
    """The set's binaries into `staging`: "download", or "build" when there is none to download or it failed."""
    label = f"{binary_set.name} {binary_set.version}"
    if not downloadable(binary_set):
        log(f"{label}: not published as a release download; building from Go modules")
        require_go(binary_set, "it is not published as a release download")
        BUILDERS[binary_set.name](binary_set, staging, log)
        return "build"
    try:
        download_set(binary_set, staging, download_base.get(binary_set.name))
        return "download"
    except (OSError, urllib.error.URLError, ValueError) as download_error:
        reason = getattr(download_error, "reason", download_error)
        log(f"{label}: download not possible ({reason}); building from Go modules")
        require_go(binary_set, f"the download failed ({reason})")
        BUILDERS[binary_set.name](binary_set, staging, log)
        return "build"
