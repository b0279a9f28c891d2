"""Checks several tests make: that nothing a run started is left, and recorded /metrics scrapes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import psutil

from loadtests.analysis.metrics import Snapshot
from loadtests.binaries import cache as binaries
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.controlplane.processes import ProcessRecord, listening_ports
from loadtests.kube.access import ClusterAccess
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.rest import RestClient
from loadtests.load.generator import LoadGenerator, LoadOutcome, StepLoad
from loadtests.run.fleet import Fleet

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


def fleet_of(rest: RestClient, nodes: int) -> Fleet:
    """The harness's namespaces and `nodes` fake nodes Ready, as a step's fleet before its load starts."""
    fleet = Fleet(rest)
    fleet.ensure_namespaces()
    fleet.scale_nodes(nodes, timeout_s=120)
    return fleet


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf of a decoded object by its path ("spec.containers[0].name"): two decodings compared value by value."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in leaves(item, f"{path}[{i}]").items()}
    return {path: value}


def send_json(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
    """A test server's JSON answer."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
