"""A fresh local control plane with a fleet of idle kwok nodes, for a benchmark's measurement: started in a
temporary folder, its nodes Ready, stopped and removed afterwards whatever happened."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loadtests.binaries import cache as binaries
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.kube.rest import RestClient
from loadtests.run.fleet import Fleet

USER_AGENT = "k8s-loadtest/benchmark"


@dataclass
class FleetPlane:
    """What a benchmark gets: the plane's target, a client of it, and how long its nodes took to be Ready."""

    info: TargetInfo
    client: RestClient
    ramp_s: float


@contextlib.contextmanager
def fleet_plane(name: str, nodes: int, bins: binaries.Binaries, *, timeout_s: float = 900) -> Iterator[FleetPlane]:
    """A control plane named `name` (the process's pid added) with `nodes` idle kwok nodes, Ready."""
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        plane = LocalControlPlane(LocalOptions(name=f"{name}-{os.getpid()}", directory=Path(tmp) / "c"), bins)
        plane.up(log=lambda _m: None)
        client = None
        try:
            info = plane.info()
            client = RestClient(info.access, user_agent=USER_AGENT)
            ramp = Fleet(client).scale_nodes(nodes, timeout_s=timeout_s)
            yield FleetPlane(info, client, ramp.seconds)
        finally:
            if client is not None:
                client.close()
            plane.down()
