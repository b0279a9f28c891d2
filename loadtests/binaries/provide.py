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
    sets_for,
)
from loadtests.binaries.download import download_set
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
    cache_folder(binary_set.directory.parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{binary_set.name}-", dir=binary_set.directory.parent))
    try:
        try:
            download_set(binary_set, staging, download_base.get(binary_set.name))
            source = "download"
        except (OSError, urllib.error.URLError, ValueError) as download_error:
            reason = getattr(download_error, "reason", download_error)
            log(f"{binary_set.name} {binary_set.version}: download not possible ({reason}); building from Go modules")
            require_go(binary_set, reason)
            BUILDERS[binary_set.name](binary_set, staging, log)
            source = "build"
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
