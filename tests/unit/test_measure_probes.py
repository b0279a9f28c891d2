"""StepProbes fills a step from whatever works and names whatever did not (no cluster: an unreachable one)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from loadtests.analysis.metrics import Snapshot
from loadtests.controlplane.base import TargetInfo
from loadtests.kube.access import ClusterAccess
from loadtests.measure import probes as probes_module
from loadtests.measure.probes import StepProbes
from loadtests.results import StepResult

DATA = Path(__file__).parent / "data"


def closed_port() -> int:
    """A loopback port nothing listens on, so every connection is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def unreachable_target(pids: dict[str, list[int]]) -> TargetInfo:
    access = ClusterAccess(server=f"http://127.0.0.1:{closed_port()}", kubeconfig="/nonexistent")
    return TargetInfo(access=access, etcd_metrics_url=None, pids=pids)


def step() -> StepResult:
    return StepResult(index=0, name="unit", nodes=1, pods_per_node=1, started_at="", duration_s=1.0)


def test_failures_are_noted_and_the_rest_is_still_measured() -> None:
    probes = StepProbes(unreachable_target({"harness": [os.getpid()]}), "probe-ns", "churn-ns",
                        process_interval_s=0.05)
    probes.start()
    result = probes.gather(step())
    notes = "\n".join(result.notes)
    for what in ("apiserver /metrics scrape at step start", "apiserver /metrics scrape at step end",
                 "pod startup watch of pods in churn-ns: never listed", "watch delay probe start"):
        assert what in notes
    # its watch never listed: left as not measured (no source), not measured as "no pod started"
    assert result.pod_startup.count == 0 and result.pod_startup.source == ""
    assert [p.component for p in result.processes] == ["harness"]  # the sampler did not depend on the rest
    assert result.server == [] and result.requests_by_code == {}
    assert result.etcd.db_size_bytes is None
    assert probes.count_requests("POST", "pods") is None
    probes.stop()  # after gather: harmless
    probes.stop()


def test_recorded_scrapes_fill_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    scrapes = iter([Snapshot.parse((DATA / f"apiserver_metrics_{which}.txt").read_text())
                    for which in ("start", "end")])
    monkeypatch.setattr(probes_module, "scrape_apiserver", lambda access, **_: next(scrapes))
    probes = StepProbes(unreachable_target({}), "probe-ns", "churn-ns")
    probes.start()
    probes.add_pids("loadgen", [os.getpid()])
    result = probes.gather(step())
    assert result.requests_by_code == {"200": 1462, "201": 203, "404": 4, "429": 7}
    assert len(result.server) == 7
    assert result.apiserver["watch_events"] == 4500
    assert result.storage_objects["pods"] == 1200
    # no etcd URL: the size comes from the apiserver, and says so
    assert result.etcd.db_size_bytes == 52035584
    assert "apiserver_storage_size_bytes" in result.etcd.source
    assert [p.component for p in result.processes] == ["loadgen"]
    assert probes.count_requests("POST", "pods") == 207
    assert probes.start_snapshot is not None and probes.end_snapshot is not None
    assert any("watch delay probe start" in note for note in result.notes)


def test_the_plan_names_the_probes_the_registry_has() -> None:
    """config/measure.py names every probe for plans (config never imports measure/); the two lists agree, in
    the order the probes start."""
    from loadtests.config import measure

    assert [p.name for p in measure.PROBES] == list(probes_module.PROBES)


@pytest.mark.parametrize(("asked", "said"), [
    ({"profile": False}, "measure.profile: is not a probe; the probes are: audit, etcd, apiserver"),
    ({"health": False}, "measure.health: cannot be turned off: it is needed for the saturation verdict"),
    ({"audit": "no"}, "measure.audit: must be true or false (got 'no')"),
    (["audit"], "measure: must be a mapping of probe name to true or false"),
])
def test_a_plan_asks_only_for_probes_that_exist_and_may_go(asked: object, said: str) -> None:
    from loadtests.config.plan import parse
    from loadtests.errors import PlanError

    with pytest.raises(PlanError, match=".*") as refused:
        parse({"steps": [{"nodes": 1}], "load": {"scenarios": {}}, "measure": asked}, "p.yaml")
    assert str(refused.value).startswith("p.yaml: ") and said in str(refused.value), refused.value
    assert "\n" not in str(refused.value)


def test_probes_a_plan_turned_off_do_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`measure: {watch_delay: false, objects: false}`: those probes are never made, so they send nothing and
    say nothing; the plan's list is what StepProbes runs."""
    from loadtests.config.plan import parse

    plan = parse({"steps": [{"nodes": 1}], "load": {"scenarios": {}},
                  "measure": {"watch_delay": False, "objects": False, "profiles": False}}, "p.yaml")
    assert "watch_delay" not in plan.probes() and "objects" not in plan.probes() and "profiles" not in plan.probes()
    assert "apiserver" in plan.probes() and "health" in plan.probes()
    assert plan.to_dict()["measure"] == {"watch_delay": False, "objects": False, "profiles": False}
    probes = StepProbes(unreachable_target({}), "probe-ns", "churn-ns", probes=plan.probes())
    probes.start()
    result = probes.gather(step())
    notes = "\n".join(result.notes)
    assert "watch delay probe" not in notes and "object counts" not in notes
    assert "pod startup watch of pods in churn-ns: never listed" in notes  # a probe that runs still says so
    assert result.objects == {}  # not counted: "not measured", as in results before the counts existed
