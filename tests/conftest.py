"""What every test shares: the pinned binaries, and the rules that sort tests into tiers.

A test is an integration test exactly when it needs the control-plane binaries (the `bins` fixture, directly
or through a fixture that starts a control plane): then it starts a real etcd and kube-apiserver.
`pytest -m "not integration"` runs everything else, with no control plane.

A test is a CLI test when it starts a process (the `loadtest` command, or anything through subprocess) or
opens a browser, itself or through a function of its module it calls: `pytest -m "not cli and not
integration"` is the quick tier, pure functions on recorded data (`make unit-test`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import types

import pytest

from loadtests.binaries import cache as binaries
from loadtests.config import versions

SPAWNING_NAMES = frozenset({"loadtest", "start_loadtest", "subprocess", "Popen", "Chromium"})
BROWSER_FIXTURES = frozenset({"browser", "chromium"})
_OWN_CLUSTERS = pytest.StashKey[str]()


def _starts_a_process(code: types.CodeType, scope: dict[str, object], seen: set[int]) -> bool:
    """Whether this code (or a function of its module it names, or a function nested in it) starts a process."""
    if id(code) in seen:
        return False
    seen.add(id(code))
    if SPAWNING_NAMES & set(code.co_names):
        return True
    nested = [const for const in code.co_consts if isinstance(const, types.CodeType)]
    called = [getattr(scope.get(name), "__code__", None) for name in code.co_names]
    return any(_starts_a_process(inner, scope, seen) for inner in [*nested, *called] if inner is not None)


def pytest_configure(config: pytest.Config) -> None:
    """The suite's local control planes keep their folders in a folder of its own (workers inherit it): a stale
    folder another run left in the machine's cache is that run's business, not a warning in this suite's runs."""
    if not os.environ.get("LOADTEST_CLUSTERS"):
        os.environ["LOADTEST_CLUSTERS"] = tempfile.mkdtemp(prefix="k8s-loadtest-suite-clusters-")
        config.stash[_OWN_CLUSTERS] = os.environ["LOADTEST_CLUSTERS"]


def pytest_unconfigure(config: pytest.Config) -> None:
    own = config.stash.get(_OWN_CLUSTERS, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)
        del os.environ["LOADTEST_CLUSTERS"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "bins" in fixtures:
            item.add_marker(pytest.mark.integration)
        function = getattr(item, "function", None)
        if BROWSER_FIXTURES & fixtures or (function is not None and _starts_a_process(
                function.__code__, function.__globals__, set())):
            item.add_marker(pytest.mark.cli)


@pytest.fixture(scope="session")
def bins() -> binaries.Binaries:
    """The pinned binaries; `make test` provides them before pytest starts."""
    return binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
