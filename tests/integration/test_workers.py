"""`--workers 2`: a Locust master with two worker processes, and results that carry both workers' requests."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from loadtests.controlplane.base import TargetInfo
from loadtests.kube.rest import RestClient
from loadtests.load.generator import LoadGenerator, StepLoad
from loadtests.run.fleet import Fleet

RATE = 6.0


def test_two_workers_share_the_load_and_both_are_counted(control_plane: TargetInfo, rest: RestClient,
                                                         tmp_path: Path) -> None:
    fleet = Fleet(rest)
    fleet.ensure_namespaces()
    fleet.scale_nodes(10, timeout_s=120)
    # two churn users at RATE/2 each: one lands on each worker, so the total rate needs both workers' counts
    load = {"pod_churn": {"rate": RATE, "users": 2, "lifetime_s": 3.0}}
    gen = LoadGenerator(StepLoad(load, nodes=10, duration_s=15, out_dir=tmp_path, workers=2, run_id="it-workers",
                                 windowed=True), control_plane.access)
    try:
        gen.start()
        pids = gen.pids()
        assert len(pids) == 3  # master + 2 workers
        assert gen.wait_spawned(90)
        cmdlines = [" ".join(psutil.Process(p).cmdline()) for p in pids]
        assert sum(" --worker" in c for c in cmdlines) == 2 and sum(" --master " in c for c in cmdlines) == 1
        gen.open_window()  # as the runner does: the master restarts its statistics ...
        window_ends = time.monotonic() + 15
        while time.monotonic() < window_ends:  # ... the load runs through the 15 s window ...
            assert gen.running()
            time.sleep(0.5)
        gen.close_window()  # ... and the figures are taken from every worker before any user stops
        outcome = gen.wait(timeout=60)
        assert gen.stats_path().name.endswith("_window_stats.csv")
    finally:
        gen.stop()
    creates = next(c for c in outcome.client if c.name == "POST pods")
    churn = next(r for r in outcome.rates if r.scenario == "pod_churn")
    # one worker alone could reach at most RATE/2; both together reach close to RATE
    assert churn.achieved_per_s >= 0.75 * RATE, (churn, outcome.notes)
    assert creates.count >= 0.75 * RATE * 15
    assert creates.count <= 1.1 * RATE * 15 + 2, "counts from before the window were kept"
