"""The contract between the runner and the Locust processes: what every Locust process needs to build its
users, handed over as a JSON file named by LOADTEST_LOAD_CONFIG (written by loadtests.load.generator)."""

from __future__ import annotations

import json
import os
import re
import signal
from dataclasses import asdict, dataclass, field
from typing import Any

from loadtests.kube.access import ClusterAccess
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.objects import node_name

CONFIG_ENV = "LOADTEST_LOAD_CONFIG"
REMOTE_WORKER_ENV = "LOADTEST_REMOTE_WORKER"  # a worker of another machine: its RemoteWorkerSetup (JSON file)
FINAL_STATS_SUFFIX = "_final_stats.csv"  # the locustfile's stats at quit, complete (see locustfile.py)
FINAL_FAILURES_SUFFIX = "_final_failures.csv"
WINDOW_STATS_SUFFIX = "_window_stats.csv"  # the stats when the runner closed the measured window
WINDOW_FAILURES_SUFFIX = "_window_failures.csv"
# the runner wakes the master at once when it opens or closes the measured window (a file each); between wakes the
# master looks for the files only every WINDOW_LOOK_S, not 50 times a second through the whole window
WINDOW_SIGNAL = signal.SIGUSR1
WINDOW_LOOK_S = 1.0
WINDOW_WORKERS_SUFFIX = "_window_workers.json"  # the master's per-worker figures (loadtests/load/locust/worker_link.py)


def run_label(run_id: str) -> str:
    """The run id as a label value and name fragment: lowercase alphanumerics and '-', at most 20 (the load's
    objects carry it, and the runner finds them by it)."""
    label = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")[-20:].strip("-")
    return label or "run"


@dataclass(frozen=True)
class LoadConfig:
    access: ClusterAccess
    scenarios: dict[str, dict[str, Any]]
    nodes: int
    node_names: list[str] | None = None  # None: the KWOK fleet's names, kwok-node-00000..
    run_id: str = ""
    workers: int = 0  # Locust worker processes (0 = one local process); node watchers stride over them
    stop_at: float | None = None  # wall-clock time after which users end themselves, whatever Locust does
    # The measured window: once this file exists, Locust's statistics restart from zero, so the step's figures
    # exclude the users' start-up (a burst of new connections). The window closes when window_close_file
    # appears (the runner's end scrape): the statistics are written then, before any user stops, so stopping
    # (cut connections, clean-up) is in no figure; without a close file the run ends window_s later.
    window_file: str | None = None
    window_s: float | None = None
    window_close_file: str | None = None
    # workers of other machines: the identity of the cluster (its kube-system namespace uid) every worker must
    # reach, and how many the master waits for before any user starts (they get this config by message)
    cluster_uid: str | None = None
    remote_workers: int = 0
    remote_wait_s: float = 120.0
    final_step: bool = False  # the run's last planned step: workers of other machines end after it
    # scenarios that send as a tenant of their own (target.tenants): scenario name -> that user's access
    scenario_access: dict[str, ClusterAccess] = field(default_factory=dict)
    # each of the step's nodes' kubelet as that node, and their kube-proxy (node_identity.py), where a scenario
    # needs them and the target can make them; None: node agents send as `access`
    node_identities: NodeIdentities | None = None

    def without_access(self) -> dict[str, Any]:
        """The config as sent to a worker of another machine: credentials never leave this one."""
        data = self.to_dict()
        del data["access"]
        data.pop("scenario_access", None)
        data.pop("node_identities", None)
        return data

    def access_for(self, scenario: str) -> ClusterAccess:
        """Who a scenario's users are to the apiserver: its tenant, or the load's own identity."""
        return self.scenario_access.get(scenario, self.access)

    def node(self, index: int) -> str:
        """The name of the index-th node (wrapping around), so watchers spread over the fleet."""
        count = len(self.node_names) if self.node_names else self.nodes
        index %= max(1, count)
        return self.node_names[index] if self.node_names else node_name(index)

    def run_label(self) -> str:
        return run_label(self.run_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadConfig:
        data = dict(data)
        access = ClusterAccess(**data.pop("access"))
        data["scenario_access"] = {name: ClusterAccess(**found)
                                   for name, found in (data.pop("scenario_access", None) or {}).items()}
        identities = data.pop("node_identities", None)
        data["node_identities"] = NodeIdentities.from_dict(identities) if identities else None
        names = data.pop("node_names", None)
        if isinstance(names, dict):  # {"prefix": "kwok-node-", "count": N}: zero-padded like the fleet's
            names = [f"{names['prefix']}{i:05d}" for i in range(int(names["count"]))]
        return cls(access=access, node_names=names, **data)

    @classmethod
    def from_env(cls) -> LoadConfig:
        path = os.environ.get(CONFIG_ENV)
        if not path:
            raise RuntimeError(f"{CONFIG_ENV} is not set: the locustfile is started by loadtests.load.generator")
        with open(path) as handle:
            return cls.from_dict(json.load(handle))


@dataclass(frozen=True)
class RemoteWorkerSetup:
    """What a `loadtest worker` hands its Locust worker process: this machine's own access to the cluster,
    that cluster's identity, a label for the master's notes, and where to say how the step went."""

    access: ClusterAccess
    cluster_uid: str
    label: str
    status_file: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RemoteWorkerSetup:
        return cls(**{**data, "access": ClusterAccess(**data["access"])})
