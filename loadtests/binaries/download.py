"""Official release binaries, downloaded and checked (the first way to provide a set that is not cached)."""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from loadtests.binaries.cache import BinarySet, machine_arch

DOWNLOAD_TIMEOUT_S = 15.0


_RELEASE_BASE = {
    "kube": "https://dl.k8s.io/release",
    "etcd": "https://github.com/etcd-io/etcd/releases/download",
    "kwok": "https://github.com/kubernetes-sigs/kwok/releases/download",
}


def downloadable(binary_set: BinarySet) -> bool:
    """Whether the set is published as release binaries (kubemark is not: it is only ever built)."""
    return binary_set.name in _RELEASE_BASE


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:  # noqa: S310 - fixed https bases
        return response.read()


def download_set(binary_set: BinarySet, dest: Path, base: str | None) -> None:
    if os.environ.get("LOADTEST_OFFLINE"):
        raise OSError("not attempted: LOADTEST_OFFLINE is set")
    base = (base or _RELEASE_BASE[binary_set.name]).rstrip("/")
    arch, version = machine_arch(), binary_set.version
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
