"""A real control plane for the integration tests: etcd, kube-apiserver, scheduler, controller-manager, kwok.

Started once per session in a temporary folder, stopped at the end; the teardown itself is checked to leave
no process and no bound port.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtests import binaries
from loadtests.k8sclient import RestClient
from loadtests.target.base import TargetInfo
from loadtests.target.local import LocalControlPlane, LocalOptions
from loadtests.target.processes import listening_ports

pytestmark = pytest.mark.integration


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def bins() -> binaries.Binaries:
    """The pinned binaries; `make test` provides them before pytest starts."""
    return binaries.find(os.environ.get("KUBE_VERSION") or binaries.DEFAULT_KUBE_VERSION)


@pytest.fixture(scope="session")
def local_plane(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    directory: Path = tmp_path_factory.mktemp("cluster")
    plane = LocalControlPlane(LocalOptions(name=f"pytest-{os.getpid()}", directory=directory), bins)
    plane.up(log=lambda _m: None)
    state = plane.state
    assert state is not None
    pids = [p.pid for p in state.processes]
    try:
        yield plane
    finally:
        plane.down()
        assert not any(p.alive() for p in state.processes)
        assert listening_ports(pids) == []


@pytest.fixture(scope="session")
def control_plane(local_plane: LocalControlPlane) -> TargetInfo:
    return local_plane.info()


@pytest.fixture()
def rest(control_plane: TargetInfo) -> Iterator[RestClient]:
    client = RestClient(control_plane.access)
    yield client
    client.close()
