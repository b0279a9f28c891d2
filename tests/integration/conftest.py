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
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.kube.rest import RestClient
from tests.checks import assert_nothing_left


@pytest.fixture(scope="session")
def local_plane(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    directory: Path = tmp_path_factory.mktemp("cluster")
    plane = LocalControlPlane(LocalOptions(name=f"pytest-{os.getpid()}", directory=directory), bins)
    plane.up(log=lambda _m: None)
    state = plane.state
    assert state is not None
    records = list(state.processes)
    try:
        yield plane
    finally:
        plane.down()
        assert_nothing_left(records)


@pytest.fixture(scope="session")
def control_plane(local_plane: LocalControlPlane) -> TargetInfo:
    return local_plane.info()


@pytest.fixture()
def rest(control_plane: TargetInfo) -> Iterator[RestClient]:
    client = RestClient(control_plane.access)
    yield client
    client.close()
