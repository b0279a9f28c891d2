"""What every test shares: the pinned binaries, and the one rule that makes a test an integration test.

A test is an integration test exactly when it needs the control-plane binaries (the `bins` fixture, directly
or through a fixture that starts a control plane): then it starts a real etcd and kube-apiserver.
`pytest -m "not integration"` runs everything else, with no control plane.
"""

from __future__ import annotations

import os

import pytest

from loadtests.binaries import cache as binaries
from loadtests.config import versions


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "bins" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def bins() -> binaries.Binaries:
    """The pinned binaries; `make test` provides them before pytest starts."""
    return binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
