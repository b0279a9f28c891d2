"""Your cluster, replayed, end to end: a "production" cluster the test builds on its own terms (benchmarks/
production.py: fake nodes, ConfigMaps, Secrets and a custom resource of a few sizes in namespaces of its own, a
node, a service account and a user sending a steady traffic, its apiserver's audit log recording it) is captured
as a user captures one (`loadtest capture --audit-log`), then replayed on a fresh control plane at k = 1 and
k = 2 (`loadtest run --plan` of a `workload: {profile, scale}`; k = 2 following the captured per-minute curve,
`shape: timeline`), and every fidelity target the replay judges of
itself holds: object counts per kind exact, size p50 and p99 within 10 % (small objects among them), each class
of at least 1/s within 10 % under its own client class, watches within 5 %, the replayable share at least 95 %."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.production import NODE, SERVICE_ACCOUNT, USER, capture_args, production_cluster, send_traffic
from loadtests.binaries import cache as binaries
from loadtests.capture.compare import MET, MISSED, NOT_MEASURED
from tests.cli import loadtest

pytestmark = pytest.mark.integration

TRAFFIC_S = 15  # the source's steady traffic; its audit log's rates are from its first node's Lease on
WINDOW_S = 10  # each replay's measured window
WARMUP_S = 3


@pytest.fixture(scope="module")
def profile(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The production cluster's profile, captured once it has sent its traffic; the cluster stopped after."""
    directory = tmp_path_factory.mktemp("production")
    out = directory / "profile.yaml"
    with production_cluster(bins, directory, f"production-{os.getpid()}") as cluster:
        sent = send_traffic(cluster, TRAFFIC_S)
        assert sent.errors == 0 and all(sent.requests.values()), sent
        done = loadtest(*capture_args(cluster, out), timeout=60)
        assert done.returncode == 0, done.stderr
    return out


def replayed(profile: Path, scale: int, shape: str, folder: Path) -> dict[str, Any]:
    """`loadtest run` of a plan replaying the profile at `scale` and `shape` on a control plane of its own: its
    step's replay_fidelity comparison."""
    plan = folder / f"replay-x{scale}.yaml"
    plan.write_text(yaml.safe_dump({"workload": {"profile": str(profile), "scale": scale, "duration_s": WINDOW_S,
                                                 "warmup_s": WARMUP_S, "shape": shape}}))
    out = folder / f"run-x{scale}"
    done = loadtest("run", "--plan", str(plan), "--no-gate", "--out", str(out), timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert ("timeline" in results["plan"]["replay"]["traffic"]) == (shape == "timeline"), results["plan"]["replay"]
    [step] = results["steps"]
    fidelity = step["replay_fidelity"]
    assert fidelity["error"] == "" and fidelity["compared"] is not None, fidelity
    return fidelity["compared"]


def shortfalls(compared: dict[str, Any]) -> list[str]:
    """Every figure judged and not met, in a line each."""
    found = []
    for kind in compared["kinds"]:
        for figure in ("count", "size_p50", "size_p99"):
            if kind[figure] and kind[figure]["verdict"] in (MISSED, NOT_MEASURED):
                found.append(f"{kind['kind']} {figure}: {kind[figure]} {kind['note']} {kind['size_note']}")
    found += [f"{c['verb']} {c['resource']} {c['client_class']}: {c['per_second']}" for c in compared["classes"]
              if c["per_second"]["verdict"] in (MISSED, NOT_MEASURED)]
    found += [f"watches {w['resource']}: {w['open']} {w['note']}" for w in compared["watches"]
              if w["open"]["verdict"] in (MISSED, NOT_MEASURED)]
    if compared["replayed"]["verdict"] != MET:
        found.append(f"replayed share: {compared['replayed']}")
    return found


# k = 2 follows the captured per-minute curve (shape: timeline): whole passes of it keep every class's mean
@pytest.mark.parametrize(("scale", "shape"), [(1, "mean"), (2, "timeline")])
def test_a_production_cluster_replays_within_every_target(profile: Path, scale: int, shape: str,
                                                          tmp_path: Path) -> None:
    compared = replayed(profile, scale, shape, tmp_path)
    assert shortfalls(compared) == [] and compared["passed"], shortfalls(compared)
    kinds = {kind["kind"]: kind for kind in compared["kinds"]}
    # the cluster's own objects, each kind at its count × k, the custom resource's installed from its definition
    for kind in ("ConfigMap", "Secret", "Widget"):
        assert kinds[kind]["count"]["verdict"] == MET and kinds[kind]["size_p50"]["verdict"] == MET, kinds[kind]
    # small objects (a few hundred bytes) at their size: the replay's sized without the harness's labels, as the
    # original's they stand for, what those labels add said beside
    assert kinds["ConfigMap"]["size_p50"]["original"] < 700, kinds["ConfigMap"]
    assert "load tester's labels" in kinds["ConfigMap"]["size_note"], kinds["ConfigMap"]
    # the control plane's watch of the custom resource, which the replay waits for once it installed the CRD
    assert [w["open"]["verdict"] for w in compared["watches"] if w["resource"] == "widgets"] == [MET]
    # the traffic's every identity is a class judged (at least 1/s) and met, as the client class it was
    judged = {c["client_class"] for c in compared["classes"] if c["per_second"]["verdict"] == MET}
    assert {NODE, SERVICE_ACCOUNT, USER} <= judged, compared["classes"]
    assert compared["replayed"]["share"] >= 0.95
