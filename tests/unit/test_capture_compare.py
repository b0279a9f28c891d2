"""How faithful a replay was: two profiles built here, figure by figure, judged against the targets (counts exact,
sizes and rates within 10 %, watches within 5 %, 95 % of the requests replayable), a figure either side lacks
"not measured" and never met, and `loadtest capture --compare` exiting 0, 1 or 2 on them."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtests.capture.audit_tally import SOURCE as AUDIT_SOURCE
from loadtests.capture.compare import (
    ANY_CLASS,
    MET,
    MISSED,
    NOT_JUDGED,
    NOT_MEASURED,
    SIZES_ALL_OTHERS,
    SIZES_NOT_MADE,
    UNKNOWN_WATCHER,
    UNKNOWN_WATCHERS,
    WATCH_KEY,
    Fidelity,
    Judged,
    compare,
)
from loadtests.capture.profile import KindProfile, Profile, Quantiles, Skipped
from loadtests.capture.scale import check_scale, scaled_count
from loadtests.capture.traffic import METRICS_SOURCE
from loadtests.capture.traffic_types import RequestRate, TrafficProfile, WatchLoad, Window, not_replayable
from loadtests.cli.main import main
from loadtests.errors import LoadTestError
from tests.unit.test_capture_objects import figures


def kind(name: str, count: int, p50: int = 1000, p99: int = 2000, group: str = "", resource: str = "",
         **more: Any) -> KindProfile:
    sizes = Quantiles(count, p50, p99, p99, p99) if count else None
    return KindProfile(group=group, version="v1", kind=name, resource=resource or name.lower() + "s",
                       scope="Namespaced", count=count, size_bytes=sizes, **more)


def rate(resource: str, per_second: float, *, verb: str = "list", client_class: str | None = "node",
         subresource: str = "", group: str = "", window_s: float = 100.0, code: int = 200) -> RequestRate:
    return RequestRate(verb=verb, group=group, resource=resource, subresource=subresource, scope="cluster",
                       client_class=client_class, product="kubelet" if client_class else None, code=code,
                       count=round(per_second * window_s), per_second=per_second)


def watch(resource: str, open_at_end: int | None, client_class: str | None = "node",
          product: str | None = None) -> WatchLoad:
    return WatchLoad(group="", resource=resource, client_class=client_class, product=product, max_open=None,
                     mean_open=None, open_at_start=None, open_at_end=open_at_end, opened=None, lifetime_s=None)


def traffic(rates: list[RequestRate], watches: list[WatchLoad], *, audit: bool = True,
            window_s: float = 100.0) -> dict[str, Any]:
    """A traffic section as either source writes it (TrafficProfile.to_dict: None figures kept as None)."""
    classes = sorted({r.client_class for r in rates if r.client_class}) if audit else None
    return TrafficProfile(source=AUDIT_SOURCE if audit else METRICS_SOURCE, window=Window(None, None, window_s),
                          requests=sum(r.count for r in rates), rates=rates, watches=watches,
                          not_replayable=not_replayable(rates), client_classes=classes).to_dict()


def profile(*kinds: KindProfile, traffic_section: dict[str, Any] | None = None,
            skipped: list[Skipped] | None = None) -> Profile:
    return Profile(capture=figures(), kinds=list(kinds), skipped=skipped or [], traffic=traffic_section)


def only_kind(fidelity: Fidelity, name: str) -> Any:
    return next(k for k in fidelity.kinds if k.kind == name)


def test_counts_are_exact_at_the_scale_and_sizes_are_not_scaled() -> None:
    original = profile(kind("ConfigMap", 10, p50=1000, p99=4000), kind("Secret", 3))
    replay = profile(kind("ConfigMap", 20, p50=1000, p99=4000), kind("Secret", 5))
    found = compare(original, replay, 2)
    pods = only_kind(found, "ConfigMap")
    assert pods.count == Judged(20, 20, 0, False, "exact", MET)
    assert pods.size_p50 is not None and pods.size_p50.verdict == MET and pods.size_p50.original == 1000
    assert only_kind(found, "Secret").count.verdict == MISSED  # 3 × 2 is 6, not 5
    assert only_kind(found, "Secret").count.difference == -1
    assert found.tally() == {MET: 5, MISSED: 1, NOT_MEASURED: 0, NOT_JUDGED: 0} and not found.passed
    # × 1.5: 3 objects are 4.5, made as 5 (a half rounded up); 10 are 15
    assert compare(original, profile(kind("ConfigMap", 15, 1000, 4000), kind("Secret", 5)), 1.5).passed
    assert scaled_count(3, 1.5) == 5 and scaled_count(5, 0.5) == 3 and scaled_count(7, 1) == 7


@pytest.mark.parametrize("p50, p99, verdicts", [
    (1100, 2000, (MET, MET)), (900, 1800, (MET, MET)),  # 10 % either side is within
    (1101, 2201, (MISSED, MISSED)), (899, 1799, (MISSED, MISSED)),
    (1000, 2300, (MET, MISSED)),
])
def test_size_p50_and_p99_within_ten_percent_either_side(p50: int, p99: int, verdicts: tuple[str, str]) -> None:
    pods = only_kind(compare(profile(kind("ConfigMap", 4, 1000, 2000)), profile(kind("ConfigMap", 4, p50, p99)), 1),
                     "ConfigMap")
    assert (pods.size_p50.verdict, pods.size_p99.verdict) == verdicts
    assert pods.size_p50.difference == pytest.approx(p50 / 1000 - 1)


def test_a_figure_either_side_lacks_is_not_measured_never_met() -> None:
    original = profile(kind("Pod", 4), kind("Widget", 2, group="acme.example.com"), kind("Secret", 1),
                       kind("Empty", 0))
    replay = profile(kind("Pod", 0), kind("Empty", 0),
                     skipped=[Skipped("", "v1", "secrets", "forbidden (403): the user may not list it")])
    found = compare(original, replay, 1)
    pods, widgets, secrets = (only_kind(found, n) for n in ("Pod", "Widget", "Secret"))
    assert pods.count.verdict == MISSED  # the replay measured 0 pods
    assert pods.size_p50.verdict == NOT_MEASURED and pods.size_p50.replay is None  # no pod to size: never 0
    assert widgets.count == Judged(2, None, None, False, "exact", NOT_MEASURED)
    assert "does not serve" in widgets.note and "forbidden" in secrets.note
    empty = only_kind(found, "Empty")
    assert empty.count.verdict == MET and empty.size_p50 is None  # nothing to size on either side: no target
    assert MET not in {j.verdict for j in (widgets.count, secrets.count, pods.size_p50, pods.size_p99)}
    nothing_missed = compare(profile(kind("Pod", 4)), profile(kind("Pod", 4, p50=None, p99=None)), 1)
    assert nothing_missed.tally()[MISSED] == 0 and nothing_missed.tally()[NOT_MEASURED] == 2
    assert not nothing_missed.passed  # a target not measured is not shown met


def test_kinds_only_the_replay_has_are_listed_not_judged_and_owned_kinds_say_so() -> None:
    owned = kind("Pod", 10, owners={"ReplicaSet.apps": 8}, without_owner=2)
    replay = profile(kind("Pod", 10), kind("Lease", 3, group="coordination.k8s.io"), kind("Namespace", 2))
    found = compare(profile(owned), replay, 1)
    assert [(o.kind, o.group, o.count) for o in found.replay_only] == [("Lease", "coordination.k8s.io", 3),
                                                                      ("Namespace", "", 2)]
    assert found.passed and sum(found.tally().values()) == 3  # the Pods' count and sizes only
    assert "8 of 10 owned (ReplicaSet.apps)" in only_kind(found, "Pod").note


def classes_of(fidelity: Fidelity) -> dict[tuple[str, str], Judged]:
    return {(c.resource, c.client_class): c.per_second for c in fidelity.classes}


def test_rates_of_classes_of_at_least_one_per_second_after_scaling_within_ten_percent() -> None:
    original = traffic([rate("pods", 10.0), rate("nodes", 0.6), rate("pods", 0.5, client_class="controller"),
                        rate("leases", 2.0, verb="update")], [])
    replay = traffic([rate("pods", 22.0), rate("pods", 1.0, code=404), rate("nodes", 1.08),
                      rate("pods", 3.0, client_class="controller")], [])
    found = classes_of(compare(profile(traffic_section=original), profile(traffic_section=replay), 2))
    assert set(found) == {("pods", "node"), ("nodes", "node"), ("pods", "controller"), ("leases", "node")}
    assert found["pods", "node"].original == 20.0 and found["pods", "node"].replay == 23.0  # codes summed
    assert found["pods", "node"].verdict == MISSED  # +15 %
    assert found["nodes", "node"].verdict == MET  # 0.6/s × 2 is judged; 1.08 against 1.2 is -10 %
    # the control plane's own: 3 against 1 (+200 %) shown, no target a replay controls
    assert found["pods", "controller"].verdict == NOT_JUDGED and found["pods", "controller"].replay == 3.0
    assert found["leases", "node"] == Judged(4.0, 0.0, -1.0, True, "within 10 %", MISSED)  # measured: none
    at_one = classes_of(compare(profile(traffic_section=original), profile(traffic_section=original), 1))
    assert set(at_one) == {("pods", "node"), ("leases", "node")} and all(j.verdict == MET for j in at_one.values())


def test_without_the_replays_traffic_or_classes_rates_are_not_measured_or_compared_together() -> None:
    original = traffic([rate("pods", 4.0), rate("pods", 2.0, client_class="controller")], [watch("pods", 3)])
    bare = compare(profile(traffic_section=original), profile(), 1)
    assert {j.verdict for j in classes_of(bare).values()} == {NOT_MEASURED}
    assert bare.watches[0].open.verdict == NOT_MEASURED and not bare.passed
    assert any("holds no traffic" in note for note in bare.notes)
    metrics = traffic([rate("pods", 6.3, client_class=None)], [watch("pods", 3, None)], audit=False)
    together = compare(profile(traffic_section=original), profile(traffic_section=metrics), 1)
    assert classes_of(together) == {("pods", ANY_CLASS): Judged(6.0, 6.3, pytest.approx(0.05), True,
                                                                 "within 10 %", MET)}
    assert any("client classes are unknown" in note for note in together.notes)
    assert together.passed


def test_rates_of_a_window_of_no_length_are_not_measured() -> None:
    instant = traffic([rate("pods", 4.0)], [])
    instant["window"]["seconds"] = 0.0
    found = compare(profile(traffic_section=traffic([rate("pods", 4.0)], [])), profile(traffic_section=instant), 1)
    assert classes_of(found)["pods", "node"].verdict == NOT_MEASURED


@pytest.mark.parametrize("held, verdict", [(168, MET), (152, MET), (169, MISSED), (151, MISSED)])
def test_open_watches_per_resource_the_control_planes_once_the_rest_at_the_scale_within_five_percent(
        held: int, verdict: str) -> None:
    """The control plane's own watches (its components', by class or product, and the fake fleet's kwok) are held
    once whatever the cluster's size: at × 2 the expected count is theirs once and the rest twice."""
    original = traffic([], [watch("pods", 60), watch("pods", 30, "controller"),
                            watch("pods", 6, "serviceaccount", "kube-controller-manager"),
                            watch("pods", 4, "user", "kwok"), watch("nodes", 5)])
    replay = traffic([], [watch("pods", held - 10), watch("pods", 10, "controller")])
    found = {w.resource: w for w in compare(profile(traffic_section=original), profile(traffic_section=replay),
                                            2).watches}
    pods = found["pods"]
    assert pods.open.original == 40 + 60 * 2 and pods.open.replay == held and pods.open.verdict == verdict
    assert pods.control_plane == 40 and pods.note == "expected: 40 the control plane's own (once) + 60 × 2"
    assert found["nodes"].open == Judged(10, 0, -1.0, True, "within 5 %", MISSED)  # the replay measured none
    assert found["nodes"].control_plane == 0 and not found["nodes"].note
    unmeasured = traffic([], [watch("pods", None)], audit=False)
    assert compare(profile(traffic_section=original), profile(traffic_section=unmeasured),
                   1).watches[0].open.verdict == NOT_MEASURED
    assert WATCH_KEY == "open_at_end"


def test_watches_from_metrics_are_judged_at_one_and_not_judged_at_another_scale() -> None:
    """/metrics does not say whose a watch is: at × 1 the expected count is the original's whatever its share of
    the control plane's; at any other scale the once and the × k cannot be told apart, so the rows are shown,
    not judged, and say why."""
    original = traffic([], [watch("pods", 10, None)], audit=False)
    same = compare(profile(traffic_section=original), profile(traffic_section=original), 1)
    assert same.watches[0].open.verdict == MET and same.watches[0].control_plane is None
    doubled = compare(profile(traffic_section=original),
                      profile(traffic_section=traffic([], [watch("pods", 14, None)], audit=False)), 2)
    (pods,) = doubled.watches
    assert (pods.open.original, pods.open.replay, pods.open.verdict, pods.open.target) == (20, 14, NOT_JUDGED, "none")
    assert pods.note == UNKNOWN_WATCHER and UNKNOWN_WATCHERS in doubled.notes
    assert doubled.tally()[MISSED] == 0 and doubled.tally()[NOT_JUDGED] == 1
    gone = compare(profile(traffic_section=original), profile(traffic_section=traffic([], [watch("pods", None)],
                                                                                      audit=False)), 2)
    assert gone.watches[0].open.verdict == NOT_MEASURED and UNKNOWN_WATCHERS not in gone.notes


def test_the_share_of_requests_replayed_and_the_rest_listed() -> None:
    rates = [rate("pods", 9.6), rate("pods", 0.4, verb="get", subresource="exec")]
    found = compare(profile(traffic_section=traffic(rates, [])), profile(traffic_section=traffic(rates[:1], [])), 1)
    assert found.replayed is not None
    assert (found.replayed.share, found.replayed.verdict, found.replayed.seen) == (0.96, MET, 0.96)
    short = [rate("pods", 9.4), rate("pods", 0.6, verb="get", subresource="exec")]
    missed = compare(profile(traffic_section=traffic(short, [])), profile(), 1).replayed
    assert missed is not None and (missed.share, missed.verdict, missed.seen) == (0.94, MISSED, None)
    assert missed.rest == [{"what": "pods/exec", "requests": 60, "share": 0.06}]
    quiet = compare(profile(traffic_section=traffic([], [])), profile(), 1).replayed
    assert quiet is not None and quiet.verdict == NOT_MEASURED  # no request: no share, not 100 %
    assert compare(profile(kind("Pod", 1)), profile(kind("Pod", 1)), 1).replayed is None  # no traffic to replay


@pytest.mark.parametrize("scale", [0, -1, math.nan, math.inf, "abc", "", True, None])
def test_a_scale_that_is_not_a_positive_finite_number_is_refused_in_one_line(scale: object) -> None:
    with pytest.raises(LoadTestError) as refused:
        check_scale(scale)
    assert "\n" not in str(refused.value) and "positive finite" in str(refused.value)
    with pytest.raises(LoadTestError):
        compare(profile(), profile(), scale)  # type: ignore[arg-type]
    assert check_scale("2.5") == 2.5 and check_scale(1) == 1.0


def test_the_fidelity_is_plain_data_for_the_results() -> None:
    original = profile(kind("ConfigMap", 2), traffic_section=traffic([rate("pods", 3.0)], [watch("pods", 2)]))
    data = json.loads(json.dumps(compare(original, original, 1).to_dict()))
    assert data["passed"] is True and data["targets"] == {MET: 6, MISSED: 0, NOT_MEASURED: 0, NOT_JUDGED: 0}
    assert data["kinds"][0]["count"]["verdict"] == MET and data["classes"][0]["client_class"] == "node"
    assert data["watch_figure"].startswith("open_at_end")


def written(tmp_path: Path, name: str, found: Profile) -> str:
    return str(found.write(tmp_path / name))


@pytest.fixture
def pair(tmp_path: Path) -> tuple[str, str, str]:
    """An original, a faithful replay of it at × 2 and an unfaithful one, as files."""
    section = traffic([rate("pods", 3.0)], [watch("pods", 4)])
    double = traffic([rate("pods", 6.0)], [watch("pods", 8)])
    return (written(tmp_path, "original.yaml", profile(kind("ConfigMap", 5), traffic_section=section)),
            written(tmp_path, "good.yaml", profile(kind("ConfigMap", 10), kind("Lease", 1), traffic_section=double)),
            written(tmp_path, "bad.yaml", profile(kind("ConfigMap", 9), traffic_section=double)))


def test_compare_exits_0_when_every_target_is_met_and_1_when_one_is_missed(
        pair: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    original, good, bad = pair
    assert main(["capture", "--compare", original, good, "--scale", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"fidelity of {good} against {original} × 2: 6 of 6 targets met")
    assert "only in the replay, not judged: Lease (1)" in out and "list pods (cluster) by node" in out
    assert main(["capture", "--compare", original, bad, "--scale", "2"]) == 1
    out = capsys.readouterr().out
    assert "5 of 6 targets met, 1 missed" in out.splitlines()[0] and "MISSED" in out
    assert main(["capture", "--compare", original, good]) == 1  # × 1: the replay made twice as many


@pytest.mark.parametrize("args, words", [
    (["--scale", "0"], "--scale: the scale must be a positive finite number"),
    (["--scale", "nan"], "positive finite"),
    (["--scale", "two"], "positive finite"),
    (["--out", "x.yaml"], "drop --out"),
])
def test_compare_refuses_bad_input_in_one_line(pair: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
                                               args: list[str], words: str) -> None:
    original, good, _ = pair
    assert main(["capture", "--compare", original, good, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_compare_refuses_a_file_that_is_no_profile_in_one_line(
        pair: tuple[str, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original, good, _ = pair
    other = tmp_path / "v2.yaml"
    other.write_text(yaml.safe_dump({**yaml.safe_load(Path(good).read_text()), "schema": "k8s-loadtest/profile/v2"}))
    plan = tmp_path / "plan.yaml"
    plan.write_text("steps: [{nodes: 10}]\n")
    for replay, words in ((str(other), "profile/v2"), (str(plan), "no schema line"),
                          (str(tmp_path / "missing.yaml"), "missing.yaml")):
        assert main(["capture", "--compare", original, replay]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err
    assert main(["capture", "--scale", "2", "--out", "p.yaml"]) == 2
    assert "--scale goes with --compare" in capsys.readouterr().err


def test_a_profile_read_back_compares_as_it_was_built(pair: tuple[str, str, str]) -> None:
    """The file drops None figures; read back, every figure is judged as the one in memory was."""
    from loadtests.capture.profile import load

    original, good, _ = pair
    in_files = compare(load(original), load(good), 2)
    assert in_files.passed and dataclasses.asdict(in_files)["kinds"][0]["count"]["original"] == 10


@pytest.mark.parametrize(("scale", "expected"), [(1, 75), (2, 77), (0.5, 74)])
def test_the_control_planes_bootstrap_objects_are_expected_once_whatever_the_scale(scale: float,
                                                                                  expected: int) -> None:
    """73 of 75 ClusterRoles made by the control plane at bootstrap: a cluster of any size has one set of them,
    so × k takes only the other 2 (2 × 0.5 is 1); a kind without the figure (an older capture) scales whole."""
    original = profile(kind("ClusterRole", 75, group="rbac.authorization.k8s.io", control_plane=73),
                       kind("FlowSchema", 11, group="flowcontrol.apiserver.k8s.io", control_plane=11),
                       kind("Secret", 3))
    replay = profile(kind("ClusterRole", expected, group="rbac.authorization.k8s.io"),
                     kind("FlowSchema", 11, group="flowcontrol.apiserver.k8s.io"), kind("Secret", 3))
    found = compare(original, replay, scale)
    roles = only_kind(found, "ClusterRole")
    assert roles.count == Judged(expected, expected, 0, False, "exact", MET) and roles.control_plane == 73
    assert roles.note.startswith("expected: 73 made by the control plane at bootstrap")
    assert f"2 × {scale:g}" in roles.note
    assert only_kind(found, "FlowSchema").count.verdict == MET  # made once, whatever k
    secrets = only_kind(found, "Secret")
    assert secrets.count.original == scaled_count(3, scale) and secrets.control_plane is None and not secrets.note
    assert compare(original, replay, 2 if scale != 2 else 1).kinds[0].count.verdict == MISSED


def test_a_replay_on_another_version_judges_the_clusters_objects_not_the_control_planes() -> None:
    """A rehearsal replays a v1.37 capture on v1.36 too: its bootstrap ClusterRoles are fewer and some of v1.37's
    APIs it does not serve. Those counts and the control plane's watches of what it does not serve are not
    judged, said why; the cluster's own objects still are; the same minor version judges everything."""
    rbac = "rbac.authorization.k8s.io"
    original = profile(kind("ClusterRole", 75, group=rbac, control_plane=73), kind("Secret", 3),
                       kind("Bundle", 1, group="certificates.k8s.io", resource="bundles", control_plane=1),
                       traffic_section=traffic([], [watch("bundles", 2, "controller", "kube-apiserver"),
                                                    watch("secrets", 4, "user")]))
    original.traffic["watches"][0]["group"] = "certificates.k8s.io"
    older = dataclasses.replace(figures(), server_version="v1.36.3")
    replay = Profile(capture=older, kinds=[kind("ClusterRole", 71, group=rbac, control_plane=69), kind("Secret", 2)],
                     traffic=traffic([], [watch("secrets", 4, "user")]))
    found = compare(original, replay, 1)
    assert only_kind(found, "ClusterRole").count.verdict == NOT_JUDGED
    assert "captured on v1.37.2, replayed on v1.36.3" in only_kind(found, "ClusterRole").note
    bundles = only_kind(found, "Bundle")  # an API the replay's version does not serve
    assert (bundles.count.verdict, bundles.size_p50.verdict, bundles.size_p99.verdict) == (NOT_JUDGED,) * 3
    assert only_kind(found, "Secret").count.verdict == MISSED  # the cluster's own: a target on any version
    watches = {w.resource: w for w in found.watches}
    assert watches["bundles"].open.verdict == NOT_JUDGED and watches["secrets"].open.verdict == MET
    assert any(n.startswith("captured on v1.37.2, replayed on v1.36.3") for n in found.notes)
    same = compare(original, dataclasses.replace(replay, capture=dataclasses.replace(older, server_version="v1.37.9")),
                   1)
    assert only_kind(same, "ClusterRole").count.verdict == MISSED and not any("replayed on" in n for n in same.notes)


@pytest.mark.parametrize("scale", [1, 2])
def test_the_load_testers_own_objects_are_counted_on_neither_side(scale: int) -> None:
    """A cluster the harness made holds its namespaces, their defaults and its bindings; so does a replay: neither
    side counts them, and the kind's note says how many there were."""
    original = profile(kind("Namespace", 7, control_plane=4, harness=1), kind("ConfigMap", 9, harness=2))
    replay = profile(kind("Namespace", 4 + 2 * scale + 3, control_plane=4, harness=3),
                     kind("ConfigMap", 7 * scale + 5, harness=5))
    found = compare(original, replay, scale)
    for name in ("Namespace", "ConfigMap"):
        assert only_kind(found, name).count.verdict == MET, only_kind(found, name)
    assert only_kind(found, "Namespace").count.original == 4 + 2 * scale
    note = only_kind(found, "ConfigMap").note
    assert "2 of the original's are the load tester's own" in note and "5 of the replay's" in note
    assert found.passed


def test_events_are_shown_and_not_judged() -> None:
    """Events are made as things happen and expire: no count a replay controls, neither met nor missed (both
    figures shown, why in the note), and a replay otherwise faithful passes; one not measured stays so."""
    original = profile(kind("ConfigMap", 2), kind("Event", 40))
    found = compare(original, profile(kind("ConfigMap", 4), kind("Event", 13)), 2)
    events = only_kind(found, "Event")
    assert (events.count.original, events.count.replay, events.count.verdict) == (80, 13, NOT_JUDGED)
    assert events.count.target == "none" and "expire" in events.note
    assert found.tally()[NOT_JUDGED] == 3 and found.passed  # its count, its sizes (no replay makes one)
    assert only_kind(compare(original, profile(kind("ConfigMap", 4)), 2), "Event").count.verdict == NOT_MEASURED


def test_sizes_are_judged_where_a_replay_makes_the_objects_and_over_those_only() -> None:
    """A kind a replay pads (ConfigMaps): p50 and p99 of the objects it makes on both sides (made_size_bytes), not
    of every object (the control plane's kube-root-ca.crt among them, bigger, and once at any k); a kind the
    control plane, its controllers or the fleet make (Namespaces, Nodes), or one whose every object is the
    control plane's: both sides' sizes shown, not judged, and why."""
    made = Quantiles(30, 400, 420, 430, 430)
    original = profile(kind("ConfigMap", 36, p50=500, p99=1700, made_size_bytes=made),
                       kind("ServiceAccount", 6, p50=220, p99=230, made_size_bytes=Quantiles(0)),
                       kind("Namespace", 6, p50=520, p99=530, made_size_bytes=Quantiles(2, 518, 518, 520, 520)))
    replay = profile(kind("ConfigMap", 66, p50=1650, p99=1700, made_size_bytes=Quantiles(60, 410, 425, 440, 440)),
                     kind("ServiceAccount", 10, p50=220, p99=900, made_size_bytes=Quantiles(0)),
                     kind("Namespace", 8, p50=610, p99=620, made_size_bytes=Quantiles(4, 610, 610, 620, 620)))
    found = compare(original, replay, 2)
    configmaps = only_kind(found, "ConfigMap")
    assert configmaps.size_p50 is not None and configmaps.size_p99 is not None
    assert (configmaps.size_p50.original, configmaps.size_p50.replay, configmaps.size_p50.verdict) == (400, 410, MET)
    assert (configmaps.size_p99.original, configmaps.size_p99.replay, configmaps.size_p99.verdict) == (430, 440, MET)
    assert configmaps.size_note.startswith("sizes of the objects a replay makes: 30 of the original's 36")
    for name, why in (("Namespace", SIZES_NOT_MADE), ("ServiceAccount", SIZES_ALL_OTHERS)):
        sizes = only_kind(found, name)
        assert sizes.size_p50.verdict == sizes.size_p99.verdict == NOT_JUDGED and sizes.size_note == why, name
    assert only_kind(found, "Namespace").size_p50.replay == 610  # every object's, shown as measured
    assert MISSED not in {j.verdict for k in found.kinds for j in (k.size_p50, k.size_p99) if j is not None}
    # a profile captured before made_size_bytes: every object's sizes, judged as they were
    old = compare(profile(kind("ConfigMap", 36, p50=500, p99=1700)), profile(kind("ConfigMap", 72, 800, 1700)), 2)
    assert only_kind(old, "ConfigMap").size_p50.verdict == MISSED and not only_kind(old, "ConfigMap").size_note


def test_the_bytes_the_harnesss_labels_add_are_said_beside_the_sizes() -> None:
    """The replay's objects are sized without the load tester's labels, as the original's they stand for; the
    comparison says what those labels add, so the sizes met are not taken for the objects' whole."""
    made = Quantiles(8, 470, 16800, 16800, 16800)
    original = profile(kind("ConfigMap", 8, p50=470, p99=16800, made_size_bytes=made))
    replay = profile(kind("ConfigMap", 8, p50=740, p99=17070, made_size_bytes=made,
                          harness_label_bytes=Quantiles(8, 270, 272, 272, 272)))
    configmaps = only_kind(compare(original, replay, 1), "ConfigMap")
    assert configmaps.size_p50.verdict == MET
    assert "add 270 bytes to each at p50 (272 at most)" in configmaps.size_note
    assert "labels" not in only_kind(compare(original, original, 1), "ConfigMap").size_note
