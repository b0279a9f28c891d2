"""Lessons as data: every bundled lesson validates; figures are read from recorded steps; verdicts weigh the
effect against the noise; the lesson page is written from recorded runs and opens in Chromium."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from loadtests import lesson as lesson_mod
from loadtests.errors import PlanError
from loadtests.measure.scrapes import scrape_path
from loadtests.report.lesson import (
    LESSON_RESULTS,
    bias,
    compare,
    figure_reading,
    figure_value,
    judge,
    lessons_table,
    ratio,
    read,
    reading,
    write_lesson_page,
)
from loadtests.results import (
    AuditRow,
    AuditSummary,
    EtcdStats,
    ProcessStat,
    RunResult,
    ServerLatency,
    StepResult,
    save,
)
from tests.browser import find_chromium
from tests.cli import error_lines, loadtest


def test_every_bundled_lesson_validates_at_every_scale() -> None:
    found = lesson_mod.load_all()
    assert {f.name for f in found} == {"endpoints-fanout", "list-agents", "events-etcd", "etcd-quota",
                                       "node-join-burst", "etcd-disk", "apiserver-memory-per-node", "anti-affinity"}
    for found_lesson in found:
        assert found_lesson.field_report.said and found_lesson.field_report.source
        for variant in found_lesson.variants:
            for scale in lesson_mod.SCALES:
                plan = found_lesson.plan(variant, scale)
                assert plan.name == f"lesson-{found_lesson.name}-{variant.name}"
    small = [lesson_mod.load(n).plan(v, "small") for n in lesson_mod.names() for v in lesson_mod.load(n).variants]
    assert max(s.nodes + s.join.nodes for p in small for s in p.steps) <= 100  # `make test` runs every one


def test_variants_differ_only_where_they_say() -> None:
    burst = lesson_mod.load("node-join-burst")
    at_once, spread = (burst.plan(v, "small") for v in burst.variants)
    assert at_once.steps[0].join.over_s == 0 and spread.steps[0].join.over_s == 20
    assert at_once.steps[0].join.nodes == spread.steps[0].join.nodes > 0
    assert at_once.load == spread.load
    quota = lesson_mod.load("etcd-quota")
    small, headroom = (quota.plan(v, "small") for v in quota.variants)
    assert small.target.component_args["etcd"] == ["--quota-backend-bytes=41943040"]
    assert headroom.target.component_args["etcd"] == ["--quota-backend-bytes=8589934592"]


def test_list_and_unknown_name_via_the_cli() -> None:
    listed = loadtest("lesson", "--list", timeout=60)
    assert listed.returncode == 0
    lines = [line for line in listed.stdout.splitlines() if line.strip()]
    assert len(lines) == len(lesson_mod.names()) and lines[0].startswith("anti-affinity ")
    unknown = loadtest("lesson", "endpoint-fanout", timeout=60)
    assert unknown.returncode == 2
    assert error_lines(unknown) == [f"loadtest: unknown lesson 'endpoint-fanout'; known lessons: "
                                    f"{', '.join(lesson_mod.names())}"]


def _tiny_lesson(**variant: Any) -> dict[str, Any]:
    return {
        "name": "tiny", "title": "t", "summary": "s", "field_report": {"said": "x", "source": "y"},
        "base": {"load": {"scenarios": {"pod_churn": {"rate": 1}}}},
        "scales": {"small": {"steps": [{"nodes": 5}]}, "medium": {"steps": [{"nodes": 50}]}},
        "variants": [{"name": "bad", "role": "warned", "says": "a"}, {"name": "good", "role": "fix", "says": "b",
                                                                       **variant}],
        "effect": {"measures": [{"name": "m", "source": "s", "figure": "etcd.db_size_bytes"}]},
    }


def test_a_variant_needing_a_newer_kubernetes_is_one_line() -> None:
    tiny = lesson_mod.parse(_tiny_lesson(min_kube_version="v1.99.0"), "tiny.yaml")
    with pytest.raises(PlanError, match=r"^lesson tiny: variant 'good' needs Kubernetes v1.99.0 or later "
                                        r"\(v1.37.2 chosen\); pick a newer --kube-version$"):
        tiny.check_version("v1.37.2")
    tiny.check_version("v1.99.1")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.pop("scales"), "scales: must give steps for each of: small, medium"),
    (lambda d: d["variants"].pop(), "variants: needs one `warned` variant"),
    (lambda d: d["effect"]["measures"][0].update(scrape={"metric": "x"}), "needs exactly one of"),
    (lambda d: d["variants"][0].update(plan={"steps": [{"nodes": "many"}]}), r"steps\[0\].nodes: must be an integer"),
])
def test_bad_lessons_are_refused_with_the_field(edit: Any, message: str) -> None:
    data = _tiny_lesson()
    edit(data)
    with pytest.raises(PlanError, match=message):
        lesson_mod.parse(data, "tiny.yaml")


def test_ratio_and_judge() -> None:
    assert ratio(10, 0) == math.inf and ratio(0, 0) == 1.0 and ratio(0, 5) == 0.0
    assert judge(3.0, 0.25, 2.0, True)[0] == "reproduced"
    assert judge(3.0, 0.25, 2.0, False)[0] == "inconclusive"  # repeats overlap
    assert judge(0.5, 0.25, 2.0, True)[0] == "not reproduced"  # the opposite direction
    assert judge(1.1, 0.25, 2.0, True)[0] == "not reproduced"  # a x2 effect would have stood out of +-25 %
    assert judge(1.1, 0.8, 1.5, True)[0] == "inconclusive"  # +-80 % hides a x1.5 effect


def test_a_verdict_does_not_rest_on_histogram_bounds() -> None:
    path = {"figure": "server[verb=POST].p99"}
    higher = lesson_mod.Measure("p99", "s", "apiserver", path, expect="higher", noise=0.2, min_effect=2.0)
    lower = lesson_mod.Measure("p99", "s", "apiserver", path, expect="lower", noise=0.2, min_effect=2.0)
    assert bias(higher, "", "") == ""
    assert bias(higher, "<", "<") == "unknown"  # both under the first bucket: nothing to tell them apart
    assert bias(higher, "<", "") == "overstated" and bias(higher, "", ">") == "overstated"
    assert bias(higher, ">", "") == "understated" and bias(lower, ">", "") == "overstated"
    both = compare(higher, [0.05], [0.05], "fix", "<", "<")
    assert both.verdict == "inconclusive" and "bounds" in both.reason  # not "not reproduced", as x1.00 alone says
    assert judge(5.0, 0.2, 2.0, True, "overstated")[0] == "inconclusive"
    assert judge(5.0, 0.2, 2.0, True, "understated")[0] == "reproduced"  # at least x5: the bound only hides more
    assert judge(0.2, 0.2, 2.0, True, "understated")[0] == "inconclusive"
    assert judge(1.0, 0.2, 2.0, True, "understated")[0] == "inconclusive"
    posts = _step(server=[ServerLatency("POST", "pods", "namespace", "", "", 90, 0.01, 0.03, 0.05, bounds={"p99": "<"}),
                          ServerLatency("GET", "pods", "namespace", "", "", 10, 0.01, 0.03, 0.04)])
    assert figure_reading(posts, "server[verb=POST].p99") == (0.05, "<")
    assert figure_reading(posts, "server[verb=POST].p50") == (0.01, "")
    assert figure_reading(posts, "server[verb=GET].p99") == (0.04, "")


def test_compare_uses_the_repeats_spread_and_their_separation() -> None:
    measure = lesson_mod.Measure("m", "s", "src", {"figure": "x"}, noise=0.1, min_effect=1.5)
    clear = compare(measure, [2.0, 2.1, 2.2, 2.0], [1.0, 1.05, 0.95, 1.0], "fix")
    assert clear.verdict == "reproduced" and clear.noise_from.startswith("repeats")
    overlapping = compare(measure, [2.0, 0.9, 2.2, 2.1], [1.0, 1.05, 0.95, 2.3], "fix")
    assert overlapping.verdict == "inconclusive"
    lower = lesson_mod.Measure("m", "count", "src", {"figure": "x"}, expect="lower", noise=0.1)
    assert compare(lower, [50.0], [100.0], "fix").effect == 2.0
    assert compare(measure, [], [1.0], "fix").verdict == "not measured"


def _step(index: int = 0, nodes: int = 10, **changes: Any) -> StepResult:
    step = StepResult(index=index, name=f"{nodes} nodes", nodes=nodes, pods_per_node=1, started_at="t",
                      duration_s=20.0)
    for key, value in changes.items():
        setattr(step, key, value)
    return step


def test_figures_by_path() -> None:
    step = _step(
        processes=[ProcessStat("kube-apiserver", 40.0, 8.0, 100, 90), ProcessStat("etcd", 10.0, 2.0, 50, 50),
                   ProcessStat("kube-apiserver", 5.0, 1.0, 10, 10)],
        requests_by_code={"200": 100, "500": 7, "503": 2, "429": 4},
        etcd=EtcdStats(alarms=["NOSPACE"], keys_by_prefix={"events": 12}, wal_fsync_p99_s=0.004),
    )
    assert figure_value(step, "processes[component=kube-apiserver].cpu_percent") == 45.0
    assert figure_value(step, "requests_by_code[5*]") == 9
    assert figure_value(step, "requests_by_code[429]") == 4
    assert figure_value(step, "etcd.alarms") == 1
    assert figure_value(step, "etcd.keys_by_prefix.events") == 12
    assert figure_value(step, "etcd.wal_fsync_p99_s") == 0.004
    assert figure_value(step, "processes[component=kwok].cpu_percent") is None
    assert figure_value(step, "requests_by_code[3*]") == 0  # recorded codes, none of them 3xx
    assert figure_value(_step(), "requests_by_code[5*]") is None  # no codes recorded at all


def _keep_pages(folder: Path, source: str, start: str, end: str) -> None:
    for which, text in (("start", start), ("end", end)):
        path = scrape_path(folder, source, which)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode()))


PAGE = """# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{{group="",resource="endpoints",version="v1",le="1024"}} {n}
apiserver_watch_events_sizes_bucket{{group="",resource="endpoints",version="v1",le="+Inf"}} {n}
apiserver_watch_events_sizes_sum{{group="",resource="endpoints",version="v1"}} {total}
apiserver_watch_events_sizes_count{{group="",resource="endpoints",version="v1"}} {n}
apiserver_watch_events_sizes_bucket{{group="",resource="configmaps",version="v1",le="1024"}} 5
apiserver_watch_events_sizes_bucket{{group="",resource="configmaps",version="v1",le="+Inf"}} 5
apiserver_watch_events_sizes_sum{{group="",resource="configmaps",version="v1"}} 999
apiserver_watch_events_sizes_count{{group="",resource="configmaps",version="v1"}} 5
"""


def test_scrape_and_audit_reads(tmp_path: Path) -> None:
    _keep_pages(tmp_path, "apiserver", PAGE.format(n=10, total=5000), PAGE.format(n=30, total=25000))
    step = _step(audit=AuditSummary(source="audit.log", requests=[
        AuditRow("kwok", "PUT", "leases", "namespace", "coordination.k8s.io", 40, 1.0, 0.01, {"200": 30, "500": 10}),
        AuditRow("kube-scheduler", "POST", "pods/binding", "namespace", "", 60, 1.0, 0.01, {"201": 60}),
    ]))
    sizes = lesson_mod.Measure("b", "bytes", "s", {"scrape": {"metric": "apiserver_watch_events_sizes", "stat": "sum",
                                                             "labels": {"resource": ["endpoints", "endpointslices"]}}})
    assert read(sizes, step, tmp_path) == 20000
    p99 = lesson_mod.Measure("b", "bytes", "s", {"scrape": {"metric": "apiserver_watch_events_sizes", "stat": "p99",
                                                           "labels": {"resource": "endpoints"}}})
    assert reading(p99, step, tmp_path) == (1024, "<")  # the first bucket: a bound, shown as its upper limit
    refused = lesson_mod.Measure("r", "count", "s", {"audit": {"verb": "PUT", "resource": "leases", "code": "5"}})
    assert read(refused, step, tmp_path) == 10
    bound = lesson_mod.Measure("r", "count", "s", {"audit": {"verb": "POST", "resource": "pods/binding",
                                                            "client": "kube-scheduler", "stat": "rate"}})
    assert read(bound, step, tmp_path) == 3.0
    assert read(sizes, step, tmp_path / "missing") is None


def _run(folder: Path, steps: list[StepResult]) -> None:
    run = RunResult(run_id=folder.name, plan={"name": "p", "target": {"kube_version": "v1.37.2"}}, environment={},
                    status="complete", steps=steps)
    save(run, folder)


def test_lesson_page_from_recorded_runs(tmp_path: Path) -> None:
    disk = lesson_mod.load("etcd-disk")
    _run(tmp_path / "disk", [_step(etcd=EtcdStats(wal_fsync_p99_s=0.02, backend_commit_p99_s=0.03))])
    _run(tmp_path / "memory", [_step(etcd=EtcdStats(wal_fsync_p99_s=0.001, backend_commit_p99_s=0.002))])
    page = write_lesson_page(disk, tmp_path)
    summary = json.loads((tmp_path / LESSON_RESULTS).read_text())
    assert summary["verdict"] == "reproduced"
    first = summary["comparisons"][0]
    assert first["measure"] == "etcd WAL fsync p99" and first["effect"] == pytest.approx(20.0)
    assert [c["verdict"] for c in summary["comparisons"][2:]] == ["not measured", "not measured"]
    html = page.read_text()
    assert "2 ms per write on networked SSD" in html and "REPRODUCED" in html and "×20.00" in html
    table = lessons_table([tmp_path]).splitlines()
    assert table[2] == "| `etcd-disk` | **reproduced** | etcd WAL fsync p99 | 20.0 ms | memory: 1.0 ms | ×20.00 |"


def test_growth_lesson_projects_to_the_field_scale(tmp_path: Path) -> None:
    memory = lesson_mod.load("apiserver-memory-per-node")
    steps = [_step(i, nodes, apiserver={"heap_inuse_bytes": 100e6 + 1e6 * nodes}) for i, nodes in
             enumerate((10, 30, 60))]
    _run(tmp_path / "sweep", steps)
    write_lesson_page(memory, tmp_path)
    summary = json.loads((tmp_path / LESSON_RESULTS).read_text())
    heap = summary["growths"][0]
    assert heap["per_node"] == pytest.approx(1e6)
    assert heap["projected"] == pytest.approx(100e6 + 1e6 * 7500, rel=0.01)
    assert summary["comparisons"][0]["verdict"] == "reproduced"  # x1.4 from 10 to 60 nodes, noise +-15 %


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (apt-get install chromium)")
def test_lesson_page_opens_offline_in_chromium(tmp_path: Path) -> None:
    from tests.browser import Chromium

    quota = lesson_mod.load("etcd-quota")
    _run(tmp_path / "small-quota", [_step(etcd=EtcdStats(alarms=["NOSPACE"]), requests_by_code={"500": 300},
                                          notes=["failures: 120 × POST pods: etcdserver: mvcc: database space "
                                                 "exceeded"])])
    _run(tmp_path / "headroom", [_step(requests_by_code={"201": 300})])
    html = write_lesson_page(quota, tmp_path)
    with Chromium() as browser:
        page = browser.new_page()
        page.navigate(html.as_uri(), timeout=90)
        assert page.wait_for("document.body.dataset.charts !== 'pending' && document.body.dataset.charts",
                             timeout=90) == "drawn", page.errors
        assert page.errors == []
        assert page.evaluate("document.querySelectorAll('.js-plotly-plot .main-svg').length") > 0
        text = page.evaluate("document.body.innerText")
    assert "REPRODUCED" in text and "etcd alarm raised: NOSPACE" in text and "database space exceeded" in text


def test_nodes_not_ready_while_joining_are_not_a_saturation() -> None:
    from loadtests.results import ClusterHealth, HealthSample
    from loadtests.runner import Runner

    def step(late: float) -> StepResult:
        samples = [HealthSample(t, {"nodes_not_ready": n}) for t, n in ((5, 420), (10, 174), (20, late), (30, 0))]
        found = _step(nodes=100, ramp={"join_s": 13.8},
                      health=ClusterHealth(samples=samples, summary={"nodes_not_ready_max": 420}))
        Runner._saturated_while_measured(found)
        return found

    joined = step(late=0)
    assert joined.status == "measured"
    assert joined.notes == ["nodes NotReady while joining (up to 420) are the join itself; after it: up to 0"]
    behind = step(late=3)  # NotReady after every joining node was Ready: the fleet fell behind
    assert behind.status == "saturated" and behind.saturation["evidence"].startswith("up to 3 nodes NotReady")
