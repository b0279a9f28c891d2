"""Record the controller-manager pages the work-queue table is tested on:
`.venv/bin/python tests/unit/data/record_controller_queues.py`.

A local control plane (etcd in memory) with 20 kwok nodes; the controller-manager's /metrics scraped, then
ClusterLoader2's mix at 20 nodes and 10 pods per node created (Deployments with their ConfigMaps, Secrets and
Services, StatefulSets, Jobs, a DaemonSet) until every controlled pod runs, then scraped again. Both pages are
trimmed to the families the health sampler reads and written as
kube-controller-manager_<version>_workload_{start,end}.txt beside this script.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from loadtests.analysis.metrics import select_families  # noqa: E402
from loadtests.binaries.cache import find  # noqa: E402
from loadtests.config.cl2 import CREATE, DELETE  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.kube.rest import RestClient  # noqa: E402
from loadtests.measure.component_metrics import CONTROLLER_MANAGER, metrics_sources  # noqa: E402
from loadtests.run.cl2 import Cl2Load  # noqa: E402
from loadtests.run.fleet import Fleet  # noqa: E402

HERE = Path(__file__).parent
NODES = 20
PARAMS = {"pods_per_node": 10, "nodes_per_namespace": 100, "throughput": 50, "delete_throughput": 50,
          "scheduler_pods": 0, "scheduler_threshold": 100, "latency_pods": 0, "latency_qps": 5}


def main() -> None:
    bins = find()
    with tempfile.TemporaryDirectory(prefix="record-queues-") as tmp:
        plane = LocalControlPlane(LocalOptions(name="record-queues", directory=Path(tmp) / "plane",
                                               etcd_storage="memory"), bins)
        plane.up(log=print)
        try:
            client = RestClient(plane.access())
            Fleet(client).scale_nodes(NODES)
            sources, _ = metrics_sources(plane.info(), timeout_s=10)
            (manager,) = [s for s in sources if s.name == CONTROLLER_MANAGER]
            start = manager.page.text()
            mix = Cl2Load(client, PARAMS, "record", print)
            outcome = mix.run_phase(CREATE, NODES, 300, lambda: None)
            print("created:", outcome.rates, outcome.notes)
            end = manager.page.text()
            mix.run_phase(DELETE, NODES, 300, lambda: None)
            print("removed:", mix.remove())
        finally:
            plane.down()
    for name, text in (("start", start), ("end", end)):
        kept = select_families(text, manager.families)
        path = HERE / f"kube-controller-manager_{bins.kube_version}_workload_{name}.txt"
        path.write_text(kept)
        print(f"{path}: {len(kept.splitlines())} lines")


if __name__ == "__main__":
    main()
