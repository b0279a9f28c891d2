"""A real control plane for the integration tests: etcd, kube-apiserver, scheduler, controller-manager, kwok.

Started once per session in a temporary folder, stopped at the end; the teardown itself is checked to leave
no process and no bound port.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from loadtests.binaries import cache as binaries
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane
from loadtests.kube.rest import RestClient
from tests.checks import running_plane


@pytest.fixture(scope="session")
def local_plane(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    with running_plane(bins, tmp_path_factory.mktemp("cluster"), f"pytest-{os.getpid()}") as plane:
        yield plane


@pytest.fixture(scope="session")
def control_plane(local_plane: LocalControlPlane) -> TargetInfo:
    return local_plane.info()


@pytest.fixture()
def rest(control_plane: TargetInfo) -> Iterator[RestClient]:
    client = RestClient(control_plane.access)
    yield client
    client.close()
