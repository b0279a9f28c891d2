"""Checks several tests make: that nothing a run started is left, and recorded /metrics scrapes."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from pathlib import Path

import psutil

from loadtests.analysis.metrics import Snapshot
from loadtests.binaries import cache as binaries
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.controlplane.processes import ProcessRecord, listening_ports
from loadtests.kube.access import ClusterAccess
from loadtests.kube.node_identity import NodeIdentities
from loadtests.load.generator import LoadGenerator, LoadOutcome, StepLoad

DATA = Path(__file__).parent / "unit" / "data"


def still_alive(leftovers: list[ProcessRecord | psutil.Process]) -> list[str]:
    """What of `leftovers` still runs (a zombie has ended: it only waits for its parent to read it)."""
    alive = []
    for item in leftovers:
        if isinstance(item, ProcessRecord):
            if item.alive():
                alive.append(item.component)
            continue
        try:
            if item.is_running() and item.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"pid {item.pid}: " + " ".join(item.cmdline()[:3]))
        except psutil.NoSuchProcess:
            pass
    return alive


def assert_nothing_left(leftovers: list[ProcessRecord | psutil.Process]) -> None:
    """No recorded component (by pid and start time) and no other process is still alive, and no pid of
    them still holds a listening port."""
    alive = still_alive(leftovers)
    assert alive == [], f"still running: {alive}"
    assert listening_ports([item.pid for item in leftovers]) == []


@contextlib.contextmanager
def running_plane(bins: binaries.Binaries, directory: Path, name: str, *, kwok: bool = True
                  ) -> Iterator[LocalControlPlane]:
    """A local control plane for a test (kwok=False: one standing in for a cluster someone else runs, which a
    run brings its own kwok to); stopped at the end, and its teardown checked to leave nothing behind.

    Its etcd keeps its data in memory (a tmpfs): the suite's shared planes test function, not disks, and on a
    2-core machine their fsyncs would otherwise queue behind those of the runs measured beside them."""
    plane = LocalControlPlane(LocalOptions(name=name, directory=directory, kwok=kwok, etcd_storage="memory"), bins)
    plane.up(log=lambda _m: None)
    state = plane.state
    assert state is not None and ("kwok" in {p.component for p in state.processes}) == kwok
    try:
        yield plane
    finally:
        records = list(state.processes)
        plane.down()
        assert_nothing_left(records)


def recorded(name: str, families: Collection[str] | None = None) -> Snapshot:
    """A /metrics page recorded from a real component, in tests/unit/data (only `families`, when given)."""
    return Snapshot.parse((DATA / name).read_text(), families=families)


def run_load(step: StepLoad, access: ClusterAccess, *, spawn_timeout_s: float = 60,
             timeout_s: float = 120, node_identities: NodeIdentities | None = None) -> LoadOutcome:
    """One step's load as the runner runs it: started, every user spawned, waited for to its end; stopped
    whatever happens."""
    gen = LoadGenerator(step, access, node_identities=node_identities)
    try:
        gen.start()
        assert gen.wait_spawned(spawn_timeout_s)
        return gen.wait(timeout=timeout_s)
    finally:
        gen.stop()
