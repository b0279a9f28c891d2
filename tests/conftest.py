"""What every test shares: the pinned binaries, and the rules that sort tests into tiers.

A test is an integration test exactly when it needs the control-plane binaries (the `bins` fixture, directly
or through a fixture that starts a control plane): then it starts a real etcd and kube-apiserver.
`pytest -m "not integration"` runs everything else, with no control plane.

A test is a CLI test when it starts a process (the `loadtest` command, or anything through subprocess), opens a
browser or uses a database server the suite starts (tests/postgres.py), itself or through a function of its module
it calls: `pytest -m "not cli and not integration"` is the quick tier, pure functions on recorded data
(`make unit-test`).
"""

from __future__ import annotations

import gzip
import math
import os
import shutil
import tempfile
import types
from collections import defaultdict

import pytest

from benchmarks.suite_time import RAW as RECORDED_TIMES
from benchmarks.suite_time import cases
from loadtests.binaries import cache as binaries
from loadtests.config import versions

SPAWNING_NAMES = frozenset({"loadtest", "start_loadtest", "subprocess", "Popen", "Chromium"})
# fixtures that start a process: a browser, a database server (tests/postgres.py)
PROCESS_FIXTURES = frozenset({"browser", "chromium", "postgres"})
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


def recorded_file_seconds() -> dict[str, float]:
    """Each test file's seconds in the suite's last recorded run (benchmarks/suite_time.py keeps its JUnit XML);
    none when it is not kept."""
    try:
        xml = gzip.decompress(RECORDED_TIMES.read_bytes())
    except OSError:
        return {}
    seconds: dict[str, float] = defaultdict(float)
    for path, _, took, _ in cases(xml):
        seconds[path] += took
    return seconds


def longest_files_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """The suite's workers take whole files in the order collected (`--dist loadfile --no-loadscope-reorder`):
    the longest first, so the last files taken are short ones and both workers end together (the wall time is
    the slower worker's). A file the recorded run did not have goes first, as one of unknown length. Sorting is
    stable, so each file's tests stay together and in their own order."""
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], math.inf))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's collection: the order the files are handed out in
        longest_files_first(items, recorded_file_seconds())
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "bins" in fixtures:
            item.add_marker(pytest.mark.integration)
        function = getattr(item, "function", None)
        if PROCESS_FIXTURES & fixtures or (function is not None and _starts_a_process(
                function.__code__, function.__globals__, set())):
            item.add_marker(pytest.mark.cli)


@pytest.fixture(scope="session")
def bins() -> binaries.Binaries:
    """The pinned binaries; `make test` provides them before pytest starts."""
    return binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
