"""A replay's fidelity measured as its step measures it, on the session's control plane: the cluster captured as
the original, then captured again by the step's own code over a window of two real apiserver scrapes and compared
at k = 1 with what it was: the kinds nobody changed meanwhile count exactly, the harness's namespaces are listed,
the traffic comes from the window's scrapes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loadtests.capture.compare import MET
from loadtests.capture.replay import plan_of
from loadtests.capture.take import take
from loadtests.capture.traffic import METRICS_SOURCE
from loadtests.controlplane.base import TargetInfo
from loadtests.kube.rest import RestClient
from loadtests.measure.prometheus import scrape_apiserver
from loadtests.run import fidelity

pytestmark = pytest.mark.integration


def test_a_cluster_replayed_by_itself_counts_its_steady_kinds_exactly(control_plane: TargetInfo, rest: RestClient,
                                                                      tmp_path: Path) -> None:
    source = tmp_path / "original.yaml"
    # the harness's own objects, on both sides, are counted apart by the capture and not judged
    original = take(rest)
    original.write(source)
    plan = plan_of(original, 1, source=str(source))  # the plan as `loadtest run --profile` compiles it
    start = scrape_apiserver(control_plane.access, families=fidelity.FAMILIES)
    opened = time.time()
    rest.get("/api/v1/namespaces")  # some traffic inside the window
    end = scrape_apiserver(control_plane.access, families=fidelity.FAMILIES)
    window = fidelity.Window(start, end, opened, time.time())
    info = TargetInfo(control_plane.access, control_plane.etcd_metrics_url)  # no audit log: the scrapes' traffic
    found = fidelity.measure_fidelity(plan, info, window)
    assert found.error == "" and found.profile_path == str(source)
    assert found.traffic_source == METRICS_SOURCE and found.objects_read > 0 and found.capture_s is not None
    compared = found.compared
    assert compared is not None
    kinds = {(k["group"], k["kind"]): k for k in compared["kinds"]}
    for steady in (("rbac.authorization.k8s.io", "ClusterRole"), ("", "Namespace"),
                   ("apiextensions.k8s.io", "CustomResourceDefinition")):
        if steady in kinds:
            assert kinds[steady]["count"]["verdict"] == MET, kinds[steady]
    assert kinds[("rbac.authorization.k8s.io", "ClusterRole")]["count"]["replay"] > 0
    assert compared["targets"]["met"] > 0
