"""A replay's fidelity as its run keeps it: the step's replay_fidelity section saved and loaded, its targets as
verdicts (a missed one fails the gate and its JUnit case, a not measured one is skipped and fails nothing, as an
SLO without samples), the report's section, and the part's own pieces (the original found beside the plan, the
not-replayed shares, the window's traffic from its scrapes)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from loadtests import results
from loadtests.analysis.fidelity import fidelity_of, verdicts
from loadtests.analysis.metrics import Snapshot
from loadtests.analysis.slo import failed_checks, run_passed
from loadtests.capture.compare import compare
from loadtests.capture.replay import plan_of
from loadtests.capture.traffic import METRICS_SOURCE
from loadtests.config.workload import NotReplayed, ReplaySettings, TrafficNotReplayed
from loadtests.controlplane.base import TargetInfo
from loadtests.kube.access import ClusterAccess
from loadtests.report.html import write_report
from loadtests.results.embedded import runs_from_html
from loadtests.results.fidelity import HarnessKind, NotReplayedKind, NotReplayedRequests, RatesWindow, ReplayFidelity
from loadtests.run import fidelity as part
from tests.unit.reportdata import SAMPLE, edited_run
from tests.unit.test_capture_compare import kind, profile, rate, traffic, watch
from tests.unit.test_capture_traffic import T0, event

ORIGINAL = profile(kind("Pod", 10, p50=1000, p99=4000), kind("Secret", 3), kind("ConfigMap", 4),
                   traffic_section=traffic([rate("pods", 5.0)], [watch("pods", 10)], audit=False))


def replayed(secrets: int = 6, pods_per_s: float = 10.0) -> ReplayFidelity:
    """A replay at × 2 of ORIGINAL: every target met but the Secrets' count when `secrets` is not 6."""
    replay = profile(kind("Pod", 20, p50=1000, p99=4000), kind("Secret", secrets), kind("ConfigMap", 8),
                     kind("Lease", 2, group="coordination.k8s.io"),
                     traffic_section=traffic([rate("pods", pods_per_s)], [watch("pods", 20)], audit=False))
    return ReplayFidelity("prod.yaml", 2.0, "/profiles/prod.yaml", METRICS_SOURCE, 1.5, 36, ["loadtest-fleet"],
                          [HarnessKind("", "Pod", "pods", 20)],
                          [NotReplayedKind("Pod", "", 10, "the fleet's pods (pods_per_node)", 1.0)],
                          compare(ORIGINAL, replay, 2.0).to_dict())


def with_fidelity(found: ReplayFidelity | None) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data["steps"][0]["replay_fidelity"] = None if found is None else dataclasses.asdict(found)
    return edit


def test_the_section_saves_and_loads_as_it_was_and_gives_back_the_comparison(tmp_path: Path) -> None:
    found = replayed(secrets=5)
    run = results.load(edited_run(SAMPLE, tmp_path, with_fidelity(found)))
    assert run.steps[0].replay_fidelity == found and run.steps[1].replay_fidelity is None
    assert json.loads(json.dumps(results.to_dict(run)))["steps"][0]["replay_fidelity"] == dataclasses.asdict(found)
    assert fidelity_of(run.steps[0].replay_fidelity) == compare(ORIGINAL, profile(
        kind("Pod", 20, p50=1000, p99=4000), kind("Secret", 5), kind("ConfigMap", 8),
        kind("Lease", 2, group="coordination.k8s.io"),
        traffic_section=traffic([rate("pods", 10.0)], [watch("pods", 20)], audit=False)), 2.0)


def test_every_target_is_a_verdict_and_a_missed_one_fails_the_gate(tmp_path: Path) -> None:
    run = results.load(edited_run(SAMPLE, tmp_path, with_fidelity(replayed(secrets=5))))
    found = {v.check: v for v in verdicts(run.steps[0])}
    assert found["objects Secret"].passed is False and found["objects Pod"].passed is True
    assert found["size p99 Secret"].passed is True
    # the fleet's pods are not a replay's padded objects; whose watches they are /metrics does not say (at × 2)
    for check, why in (("size p99 Pod", "a replay makes none"), ("watches pods", "/metrics")):
        assert found[check].passed is None and found[check].verdict == "not judged" and why in found[check].reason
    assert found["rate list pods (cluster, (any))"].passed is True
    assert found["requests in replayed classes"].passed is True
    assert failed_checks(run) == ["replay fidelity: objects Secret at step 100 nodes"]
    assert not run_passed(run)
    assert run_passed(results.load(edited_run(SAMPLE, tmp_path / "met", with_fidelity(replayed()))))


def test_a_replay_not_compared_is_not_measured_and_fails_nothing(tmp_path: Path) -> None:
    broken = ReplayFidelity("prod.yaml", 2.0, error="the original profile: UnreadableFile: prod.yaml: not found")
    run = results.load(edited_run(SAMPLE, tmp_path, with_fidelity(broken)))
    (only,) = verdicts(run.steps[0])
    assert only.passed is None and "not found" in only.reason
    assert run_passed(run)


def junit_of(folder: Path) -> ET.Element:
    write_report(folder)
    return ET.parse(folder / "junit.xml").getroot()


def test_junit_has_a_case_per_target_failing_when_missed_and_skipped_when_not_measured(tmp_path: Path) -> None:
    found = replayed(secrets=5)
    found.compared["classes"][0]["per_second"].update(replay=None, difference=None, verdict="not measured")
    root = junit_of(edited_run(SAMPLE, tmp_path, with_fidelity(found)))
    (suite,) = [s for s in root.findall("testsuite") if s.get("name") == "replay fidelity: step 0: 100 nodes"]
    run = results.load(tmp_path)
    assert len(suite.findall("testcase")) == len(verdicts(run.steps[0])) == int(suite.get("tests"))
    (failed,) = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "objects Secret" and failed.get("classname") == "100 nodes: replay fidelity: objects"
    assert "replay 5 vs original × k 6" in failed.find("failure").get("message")
    skipped = {c.get("name") for c in suite.findall("testcase") if c.find("skipped") is not None}
    assert skipped == {"rate list pods (cluster, (any))", "size p50 Pod", "size p99 Pod", "watches pods"}
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "4")


def test_the_report_shows_the_fidelity_table_and_carries_it(tmp_path: Path) -> None:
    folder = edited_run(SAMPLE, tmp_path, with_fidelity(replayed(secrets=5)))
    page = write_report(folder)
    html = page.read_text()
    section = html[html.index('id="fidelity-0"'):]
    section = section[:section.index("Client-side latency")]
    assert "against prod.yaml × 2" in section and METRICS_SOURCE in section
    assert "<td>Secret</td><td class=\"n\">6</td><td class=\"n\">5</td><td class=\"n\">-1</td>" \
           "<td class=\"fail\">missed</td>" in section
    assert "the fleet&#39;s pods (pods_per_node)" in section and "100.0 %" in section
    assert "only in the replay, not judged: Lease.coordination.k8s.io 2" in section
    assert "the harness's own, not counted above (its namespaces loadtest-fleet and what is in them" in section
    assert "node Events): Pod 20" in section
    assert 'id="fidelity-1"' not in html
    assert "replay fidelity: 1 target(s) missed" in html  # the banner says why the run failed
    ((_, carried),) = runs_from_html(page)
    assert carried.steps[0].replay_fidelity == replayed(secrets=5)


def test_a_report_of_a_replay_not_compared_says_why(tmp_path: Path) -> None:
    broken = ReplayFidelity("prod.yaml", 1.0, error="the replay's capture: TargetError: cannot reach")
    html = write_report(edited_run(SAMPLE, tmp_path, with_fidelity(broken))).read_text()
    assert "Not compared: the replay&#39;s capture: TargetError: cannot reach" in html


def test_the_original_is_found_beside_the_plan_and_its_left_out_kinds_get_their_share(tmp_path: Path) -> None:
    source = tmp_path / "prod.yaml"
    ORIGINAL.write(source)
    plan = plan_of(ORIGINAL, 2, source=str(source))
    assert plan.replay is not None and part.profile_path(plan) == source
    settings = ReplaySettings("prod.yaml", 2.0, (NotReplayed("Pod", "", 10, "the fleet's"),
                                                 NotReplayed("Event", "", 3, "made as things happen"),
                                                 TrafficNotReplayed("get pods/log", 40, 0.02, "a stream")))
    assert part.not_replayed(settings, ORIGINAL) == [NotReplayedKind("Pod", "", 10, "the fleet's", 1.0),
                                                     NotReplayedKind("Event", "", 3, "made as things happen")]
    # the plan's traffic rows beside its kinds (a replay of traffic lists both)
    assert part.requests_not_replayed(settings) == [NotReplayedRequests("get pods/log", 40, 0.02, "a stream")]


def test_a_missing_original_is_said_and_nothing_is_captured(tmp_path: Path) -> None:
    plan = plan_of(ORIGINAL, 1, source=str(tmp_path / "gone.yaml"))
    # never asked: there is nothing to compare with
    info = TargetInfo(ClusterAccess(server="https://127.0.0.1:1", kubeconfig=""), etcd_metrics_url=None)
    found = part.measure_fidelity(plan, info, part.Window(None, None))
    assert found.compared is None and found.profile_path == "" and "gone.yaml" in found.error


PAGE = """# TYPE apiserver_request_total counter
apiserver_request_total{{verb="LIST",resource="pods",subresource="",scope="cluster",component="",code="200"}} {n}
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{{verb="WATCH",group="",resource="pods",subresource="",scope="cluster",component=""}} {w}
"""


def test_the_windows_traffic_comes_from_its_own_scrapes_without_an_audit_log() -> None:
    start = Snapshot.parse(PAGE.format(n=100, w=3), taken_at=10.0)
    end = Snapshot.parse(PAGE.format(n=300, w=5), taken_at=30.0)
    found, source, note = part.window_traffic(part.Window(start, end, 1000.0, 1020.0), [], b"salt")
    assert source == METRICS_SOURCE and "no audit log" in note and found is not None
    (row,) = found.rates
    assert (row.verb, row.resource, row.count, row.per_second) == ("list", "pods", 200, 10.0)
    assert [w.open_at_end for w in found.watches] == [5]
    assert part.window_traffic(part.Window(None, end), [], b"salt")[0] is None


def test_the_harness_own_objects_come_off_the_replays_counts_before_they_are_judged() -> None:
    """A replay's cluster holds the harness's namespaces and what is in them (the probes' ConfigMaps, each
    namespace's default ServiceAccount): its capture counts them apart, the step lists them, and the comparison
    does not count them (counted, they missed every exact count they fell in)."""
    captured = profile(kind("ConfigMap", 11, harness=3), kind("Secret", 6, harness=0), kind("Namespace", 7, harness=3))
    assert part.harness_kinds(captured) == [HarnessKind("", "ConfigMap", "configmaps", 3),
                                            HarnessKind("", "Namespace", "namespaces", 3)]
    found = compare(profile(kind("ConfigMap", 8), kind("Secret", 6), kind("Namespace", 4)), captured, 1)
    assert {k.kind: (k.count.replay, k.count.verdict) for k in found.kinds} == {
        "ConfigMap": (8, "met"), "Secret": (6, "met"), "Namespace": (4, "met")}


def test_a_count_not_judged_is_skipped_with_why_and_fails_nothing(tmp_path: Path) -> None:
    """Events' count is shown beside the original's × k but judged neither way: its JUnit case is skipped saying
    why, the report tallies it apart, and the run's gate does not rest on it."""
    found = replayed()
    original = profile(*ORIGINAL.kinds, kind("Event", 30), traffic_section=ORIGINAL.traffic)
    replay = profile(kind("Pod", 20, p50=1000, p99=4000), kind("Secret", 6), kind("ConfigMap", 8),
                     kind("Event", 7), traffic_section=traffic([rate("pods", 10.0)], [watch("pods", 20)], audit=False))
    found.compared = compare(original, replay, 2.0).to_dict()
    found.rates_window = RatesWindow(20.4, 20.0, 10.0, "2 whole renewal periods of the nodes' Leases")
    folder = edited_run(SAMPLE, tmp_path, with_fidelity(found))
    run = results.load(folder)
    events = {v.check: v for v in verdicts(run.steps[0])}["objects Event"]
    assert events.passed is None and events.verdict == "not judged" and "expire" in events.reason
    assert run_passed(run)
    (suite,) = [s for s in junit_of(folder).findall("testsuite") if s.get("name").startswith("replay fidelity")]
    skipped = {c.get("name"): c for c in suite.findall("testcase") if c.find("skipped") is not None}
    assert "not judged" in skipped["objects Event"].find("skipped").get("message")
    html = (folder / "report.html").read_text()
    unjudged = sum(v.verdict == "not judged" for v in verdicts(run.steps[0]))
    assert unjudged == 6  # Events' count and sizes, the fleet's pods' sizes, the pods' watches from /metrics
    assert f"<b>{unjudged}</b> not judged (no target a replay controls)" in html
    assert "rates over 20.0 s of the window's 20.4 s: 2 whole renewal periods" in html


def test_the_harness_own_watches_come_off_the_replays_by_the_whole_audit_log(tmp_path: Path) -> None:
    """The end scrape counts every watch open; the harness's own (its health watch's, its fleet's: their user
    agents) open at the window's close are no part of the cluster replayed and come off, found in the whole log
    (they opened before the window did); the load's and the control plane's stay."""
    def watch_of(at: float, stage: str, agent: str, audit_id: str) -> str:
        return event(at, "watch", "pods", stage=stage, agent=agent, audit_id=audit_id)

    log = tmp_path / "audit.log"
    log.write_text("".join([
        watch_of(1.0, "ResponseStarted", "k8s-loadtest/health", "health-1"),  # open through the window: off
        watch_of(1.0, "ResponseStarted", "k8s-loadtest/fleet", "fleet-1"),
        watch_of(2.0, "ResponseComplete", "k8s-loadtest/fleet", "fleet-1"),  # ended before it closed: none
        watch_of(1.5, "ResponseStarted", "k8s-loadtest/requests/ReplayWatcher", "load-1"),  # the load's: stays
        watch_of(1.5, "ResponseStarted", "kube-scheduler/v1.37.2", "scheduler-1"),
        event(15.0, "list", "pods", agent="kubectl/v1.37.2"),  # in the window: its rates
        watch_of(40.0, "ResponseComplete", "k8s-loadtest/health", "health-1")]))  # after it closed
    t0 = T0.timestamp()
    assert part.harness_watches([log], t0 + 30.0) == {("", "pods"): 1}
    start = Snapshot.parse(PAGE.format(n=100, w=3), taken_at=10.0)
    end = Snapshot.parse(PAGE.format(n=300, w=3), taken_at=30.0)
    found, source, note = part.window_traffic(part.Window(start, end, t0 + 10.0, t0 + 30.0), [log], b"salt")
    assert found is not None and source == part.AUDIT_SOURCE and not note
    assert [w.open_at_end for w in found.watches] == [2] and "taken off" in found.notes[-1]
    kept = part.rates_window(found)  # no node Lease renewed in it: the rates cover the whole window
    assert kept is not None and (kept.window_s, kept.kept_s, kept.period_s) == (20.0, 20.0, None)
