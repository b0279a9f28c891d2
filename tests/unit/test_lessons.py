"""Lessons as data: every bundled lesson validates; figures are read from recorded steps; verdicts weigh the
effect against the noise; the lesson page is written from recorded runs and opens in Chromium."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from loadtests.analysis.judge import SEPARATED_SMALL, Claim, bias, far_smaller, ratio
from loadtests.analysis.judge import compare_variants as compare
from loadtests.analysis.lesson import claim_of
from loadtests.analysis.lesson_runs import LESSON_RESULTS
from loadtests.analysis.query import figure_reading, figure_value, read, reading
from loadtests.analysis.scrapes import scrape_path
from loadtests.config import lesson as lesson_mod
from loadtests.errors import PlanError
from loadtests.report.lesson import lessons_table, write_lesson_page
from loadtests.results import RunResult, StepResult, save
from loadtests.results.apiserver import ServerLatency
from loadtests.results.audit import AuditRow, AuditSummary
from loadtests.results.etcd import EtcdStats
from loadtests.results.processes import ProcessStat
from tests.browser import find_chromium
from tests.cli import error_lines, loadtest


def test_every_bundled_lesson_validates_at_every_scale() -> None:
    found = lesson_mod.load_all()
    assert {f.name for f in found} == {"endpoints-fanout", "list-agents", "events-etcd", "etcd-quota",
                                       "node-join-burst", "etcd-disk", "apiserver-memory-per-node", "anti-affinity",
                                       "relist-storm", "apf-noisy-neighbour", "leases-etcd", "large-list-memory"}
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


def test_a_lesson_file_of_ones_own_is_read_from_its_path(tmp_path: Path) -> None:
    own = tmp_path / "shorter.yaml"
    own.write_text((lesson_mod.LESSONS_DIR / "etcd-disk.yaml").read_text().replace("duration_s: 10", "duration_s: 4"))
    found = lesson_mod.load(str(own))
    assert found.name == "etcd-disk" and found.source == str(own)
    assert [s.duration_s for v in found.variants for s in found.plan(v, "small").steps] == [4, 4]
    with pytest.raises(PlanError) as caught:
        lesson_mod.load(str(tmp_path / "none.yaml"))
    assert str(caught.value) == f"{tmp_path / 'none.yaml'}: no such lesson file"


def test_list_and_unknown_name_via_the_cli() -> None:
    listed = loadtest("lesson", "--list", timeout=60)
    assert listed.returncode == 0
    lines = [line for line in listed.stdout.splitlines() if line.strip()]
    assert len(lines) == len(lesson_mod.names()) and lines[0].startswith("anti-affinity ")
    none = loadtest("lesson", "etcd-disk", "--repeat", "0", timeout=60)
    assert none.returncode == 2
    assert error_lines(none) == ["loadtest: --repeat 0: each variant needs at least one run (3, the default, for a "
                                 "verdict)"]
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
    (lambda d: d["variants"][0].update(plan={"steps": [{"nodes": 5, "duration_s": math.inf}]}),
     r"steps\[0\].duration_s: must be a finite number"),
    (lambda d: d["effect"]["measures"][0].update(min_effect=math.nan), r"min_effect: must be a finite ratio"),
    (lambda d: d.update(field_report={"said": "s", "source": "x", "figure": {"nodes": math.inf, "value": 1}}),
     r"field_report.figure.nodes: must be a finite number > 0 \(got inf\)"),
])
def test_bad_lessons_are_refused_with_the_field(edit: Any, message: str) -> None:
    data = _tiny_lesson()
    edit(data)
    with pytest.raises(PlanError, match=message):
        lesson_mod.parse(data, "tiny.yaml")


def _m(expect: str = "higher", min_effect: float = 1.5, check: bool = False) -> lesson_mod.Measure:
    return lesson_mod.Measure("m", "s", "src", {"figure": "x"}, expect=expect, min_effect=min_effect, check=check)


def test_ratio_and_the_verdicts_of_repeated_runs() -> None:
    assert ratio(10, 0) == math.inf and ratio(0, 0) == 1.0 and ratio(0, 5) == 0.0
    separated = compare(_m(), [2.0, 2.1, 2.2], [1.0, 1.05, 0.95], "fix")
    assert separated.verdict == "reproduced" and "every run of one setup beyond" in separated.reason
    assert separated.noise_from == "repeats (n=3 a side)" and separated.noise == pytest.approx(0.05)
    # a small effect counts when the runs separate: the verdict comes from the runs, not from a band
    slight = compare(_m(), [1.03, 1.04, 1.05], [1.0, 1.01, 1.02], "fix")
    assert slight.verdict == "reproduced"
    opposite = compare(_m(), [1.0, 1.05, 0.95], [2.0, 2.1, 2.2], "fix")
    assert opposite.verdict == "not reproduced" and opposite.reason.startswith("the opposite")
    # overlapping runs within x1.10 of each other, where a x1.5 effect would have separated them
    tight = compare(_m(min_effect=1.5), [1.0, 1.05, 1.1], [1.02, 1.06, 1.0], "fix")
    assert tight.verdict == "not reproduced" and "would have separated them" in tight.reason
    # the same effect with runs spread over x3: too wide to tell
    wide = compare(_m(min_effect=1.5), [1.0, 3.0, 1.5], [2.0, 1.2, 1.1], "fix")
    assert wide.verdict == "inconclusive" and "too wide" in wide.reason
    # with 4 a side the rank test can decide even where one run overlaps
    ranked = compare(_m(), [2.0, 2.1, 2.2, 2.3, 2.4], [1.0, 1.1, 1.2, 1.3, 2.05], "fix")
    assert ranked.verdict == "reproduced" and ranked.p_value is not None and ranked.p_value < 0.05
    lower = _m(expect="lower")
    assert compare(lower, [50.0], [100.0], "fix").effect == 2.0
    assert compare(_m(), [], [1.0], "fix").verdict == "not measured"


def test_a_separation_far_smaller_than_claimed_is_not_said_as_reproduced() -> None:
    """The headline sets the effect beside the claim: runs that separate by ×1.08 where the report saw ×10 do not
    read as runs that separate by ×7.6; the verdict stays reproduced (they did separate)."""
    claim = Claim(10.0, "the report saw ×10")
    small = compare(_m(), [1.08, 1.09, 1.10], [1.0, 1.005, 1.01], "fix", claim=claim)
    assert small.verdict == "reproduced" and small.size == SEPARATED_SMALL and small.claimed == 10.0
    assert small.headline.startswith("separated, far smaller than claimed: ×1.08 where the report saw ×10: every run")
    large = compare(_m(), [7.6, 7.7, 7.5], [1.0, 1.01, 0.99], "fix", claim=claim)
    assert large.verdict == "reproduced" and large.size == ""
    assert large.headline.startswith("reproduced: ×7.60 where the report saw ×10: every run")
    # runs that do not separate the described way are never called small: their own verdict speaks
    opposite = compare(_m(), [1.0, 1.05, 0.95], [2.0, 2.1, 2.2], "fix", claim=claim)
    assert opposite.size == "" and opposite.headline.startswith("not reproduced: the opposite: ×0.48 where the report")
    once = compare(_m(), [1.08], [1.0], "fix", claim=claim)
    assert once.size == "" and once.headline.startswith("×1.08 where the report saw ×10; single run")
    assert compare(_m(), [1.08, 1.09, 1.10], [1.0, 1.005, 1.01], "fix").headline.startswith("reproduced: ×1.08: ")


def test_far_smaller_is_a_quarter_of_the_claim_on_the_log_scale() -> None:
    assert far_smaller(1.7, 10) and not far_smaller(1.8, 10)  # a quarter of log(10): ×1.78
    assert far_smaller(1.1, 1.5) and not far_smaller(1.12, 1.5)  # a quarter of log(1.5): ×1.107
    assert not far_smaller(math.inf, 10) and not far_smaller(1.01, 1.0) and not far_smaller(0.0, 10)
    storm = lesson_mod.load("relist-storm")  # it quoted both setups' figures: 20 GB against 2 GB
    assert claim_of(storm, storm.deciding) == Claim(10.0, "the report saw ×10")
    disk = lesson_mod.load("etcd-disk")  # no pair quoted: the least effect the report implies
    assert claim_of(disk, disk.deciding) == Claim(2.0, "the report implies at least ×2")


def test_a_single_run_gives_the_effect_and_no_verdict() -> None:
    once = compare(_m(), [20.0], [1.0], "fix")
    assert once.verdict == "single run" and once.effect == 20.0 and once.noise is None
    assert "noise not measured" in once.reason and "reproduced" not in once.reason
    twice = compare(_m(), [20.0, 21.0], [1.0, 1.1], "fix")
    assert twice.verdict == "too few runs" and twice.noise is not None


def test_a_sanity_check_is_shown_and_never_a_verdict() -> None:
    holds = compare(_m(check=True), [3200.0], [0.0], "own etcd")
    assert holds.verdict == "check holds" and holds.check
    assert compare(_m(check=True), [0.0], [0.0], "own etcd").verdict == "check fails"
    events = lesson_mod.load("events-etcd")
    assert events.measures[0].check and events.deciding.name == "writes to the main etcd"
    burst = lesson_mod.load("node-join-burst")
    assert burst.deciding.name.startswith("the baseline load's POST pods p99")  # the report's claim: everyone slowed


def test_a_lesson_declares_no_noise() -> None:
    data = _tiny_lesson()
    data["effect"]["measures"][0]["noise"] = 0.25
    with pytest.raises(PlanError, match=r"effect.measures\[0\].noise: a lesson declares no noise: it is measured"):
        lesson_mod.parse(data, "tiny.yaml")
    data = _tiny_lesson()
    data["effect"]["measures"][0]["check"] = True
    with pytest.raises(PlanError, match="is not a `check`"):
        lesson_mod.parse(data, "tiny.yaml")
    data = _tiny_lesson()
    data["effect"]["measures"][0]["min_effect"] = math.inf
    with pytest.raises(PlanError, match="min_effect: must be a finite ratio"):
        lesson_mod.parse(data, "tiny.yaml")


def test_a_verdict_does_not_rest_on_histogram_bounds() -> None:
    path = {"figure": "server[verb=POST].p99"}
    higher = lesson_mod.Measure("p99", "s", "apiserver", path, expect="higher", min_effect=2.0)
    lower = lesson_mod.Measure("p99", "s", "apiserver", path, expect="lower", min_effect=2.0)
    assert bias(higher, "", "") == ""
    assert bias(higher, "<", "<") == "unknown"  # both under the first bucket: nothing to tell them apart
    assert bias(higher, "<", "") == "overstated" and bias(higher, "", ">") == "overstated"
    assert bias(higher, ">", "") == "understated" and bias(lower, ">", "") == "overstated"
    both = compare(higher, [0.05] * 3, [0.05] * 3, "fix", "<", "<")
    assert both.verdict == "inconclusive" and "bounds" in both.reason  # not "not reproduced", as x1.00 alone says
    up, down = [0.5, 0.55, 0.6], [0.05, 0.05, 0.05]
    assert compare(higher, up, down, "fix", "<", "").verdict == "inconclusive"  # "<" warned: may be smaller
    assert compare(higher, up, down, "fix", ">", "").verdict == "reproduced"  # at least that: the bound hides more
    assert compare(higher, down, up, "fix", ">", "").verdict == "inconclusive"
    assert compare(higher, [1.0, 1.01, 1.02], [1.0, 1.01, 1.02], "fix", ">", "").verdict == "inconclusive"
    posts = _step(server=[ServerLatency("POST", "pods", "namespace", "", "", 90, 0.01, 0.03, 0.05, bounds={"p99": "<"}),
                          ServerLatency("GET", "pods", "namespace", "", "", 10, 0.01, 0.03, 0.04)])
    assert figure_reading(posts, "server[verb=POST].p99") == (0.05, "<")
    assert figure_reading(posts, "server[verb=POST].p50") == (0.01, "")
    assert figure_reading(posts, "server[verb=GET].p99") == (0.04, "")
    # etcd's and the health summary's p99s carry their bounds the same way, keyed by their field
    disk = _step(etcd=EtcdStats(wal_fsync_p99_s=0.001, backend_commit_p99_s=0.012, bounds={"wal_fsync_p99_s": "<"}))
    assert figure_reading(disk, "etcd.wal_fsync_p99_s") == (0.001, "<")
    assert figure_reading(disk, "etcd.backend_commit_p99_s") == (0.012, "")


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


def _run(folder: Path, steps: list[StepResult], status: str = "complete") -> None:
    run = RunResult(run_id=folder.name, plan={"name": "p", "target": {"kube_version": "v1.37.2"}}, environment={},
                    status=status, steps=steps)
    save(run, folder)


def _repeats(folder: Path, steps: list[list[StepResult]], status: str = "complete") -> None:
    for k, found in enumerate(steps, start=1):
        _run(folder / f"repeat-{k}", found, status)


def _fsync(wal: float, commit: float) -> list[StepResult]:
    return [_step(etcd=EtcdStats(wal_fsync_p99_s=wal, backend_commit_p99_s=commit))]


def test_lesson_page_from_recorded_repeats(tmp_path: Path) -> None:
    disk = lesson_mod.load("etcd-disk")
    _repeats(tmp_path / "disk", [_fsync(0.02, 0.03), _fsync(0.018, 0.03), _fsync(0.022, 0.03)])
    _repeats(tmp_path / "memory", [_fsync(0.001, 0.002), _fsync(0.0011, 0.002), _fsync(0.0009, 0.002)])
    page = write_lesson_page(disk, tmp_path)
    summary = json.loads((tmp_path / LESSON_RESULTS).read_text())
    assert summary["verdict"] == "reproduced" and summary["deciding"] == "etcd WAL fsync p99"
    first = summary["comparisons"][0]
    assert first["measure"] == "etcd WAL fsync p99" and first["effect"] == pytest.approx(20.0)
    assert first["noise_from"] == "repeats (n=3 a side)"
    assert [c["verdict"] for c in summary["comparisons"][2:]] == ["not measured", "not measured"]
    assert summary["headline"].startswith("etcd WAL fsync p99 (warned / memory): reproduced: ×20.00 where the report "
                                          "implies at least ×2: every run of one setup beyond")
    html = page.read_text()
    assert "2 ms per write on networked SSD" in html and "REPRODUCED" in html and "×20.00" in html
    table = lessons_table([tmp_path]).splitlines()
    assert table[2].startswith("| `etcd-disk` | **reproduced** | etcd WAL fsync p99 | 20.0 ms (18.0 ms – 22.0 ms, "
                               "n=3) | memory: 1.0 ms (900 µs – 1.1 ms, n=3) | ×20.00 | ×20.00: every run")


def test_one_run_a_variant_writes_the_effect_and_no_verdict(tmp_path: Path) -> None:
    disk = lesson_mod.load("etcd-disk")
    _run(tmp_path / "disk", _fsync(0.02, 0.03))
    _run(tmp_path / "memory", _fsync(0.001, 0.002))
    page = write_lesson_page(disk, tmp_path).read_text()
    summary = json.loads((tmp_path / LESSON_RESULTS).read_text())
    assert summary["verdict"] == "single run"
    assert {c["verdict"] for c in summary["comparisons"]} <= {"single run", "not measured"}
    assert "×20.00" in page and "SINGLE RUN" in page and "noise not measured" in page
    assert ">reproduced<" not in page and ">not reproduced<" not in page
    assert "reproduced" not in lessons_table([tmp_path]).replace("Reproduced", "")


def test_an_aborted_or_missing_variant_is_named_and_no_verdict_rests_on_it(tmp_path: Path) -> None:
    fanout = lesson_mod.load("list-agents")
    warned, *fixes = (v.name for v in fanout.variants)
    _repeats(tmp_path / warned, [[_step()] for _ in range(3)])
    _repeats(tmp_path / fixes[0], [[_step()]], status="aborted")  # the lesson stopped in its first repeat
    page = write_lesson_page(fanout, tmp_path).read_text()
    summary = json.loads((tmp_path / LESSON_RESULTS).read_text())
    assert summary["verdict"] == "incomplete"
    states = {name: found["state"] for name, found in summary["variants"].items()}
    assert states[warned] == "complete" and states[fixes[0]] == "aborted"
    assert all(states[name] == "never ran" for name in fixes[1:])
    assert summary["headline"].startswith(f"no verdict: {fixes[0]} aborted, {fixes[1]} never ran")
    assert "INCOMPLETE" in page and f"variant {fixes[0]}: aborted" in page and "stands out" not in page
    assert all(c["verdict"] == "not measured" for c in summary["comparisons"] if c["against"] != fixes[0]
               or not c["fix"])


def test_growth_lesson_judges_shape_and_magnitude_apart(tmp_path: Path) -> None:
    memory = lesson_mod.load("apiserver-memory-per-node")
    wobble = (0.99, 1.0, 1.01)
    _repeats(tmp_path / "sweep", [[_step(i, nodes, apiserver={"heap_inuse_bytes": (100e6 + 1e6 * nodes) * w})
                                   for i, nodes in enumerate((10, 30, 60))] for w in wobble])
    write_lesson_page(memory, tmp_path)
    summary = json.loads((tmp_path / LESSON_RESULTS).read_text())
    heap = summary["growths"][0]
    assert heap["per_node"] == pytest.approx(1e6, rel=0.01)
    assert heap["per_node_ci"][0] < 1e6 < heap["per_node_ci"][1]
    assert heap["projected"] == pytest.approx(100e6 + 1e6 * 7500, rel=0.01)
    assert heap["shape"] == "linear per node"  # a fixed amount per node over a base: linear, whatever the base
    assert heap["claim_per_node"] == pytest.approx(70e9 / 7500)
    assert "the report's figure is above the measured 95 % interval" in heap["magnitude"]
    assert "(×0.11)" in heap["magnitude"]
    assert summary["comparisons"][0]["verdict"] == "reproduced"  # every last-step run beyond every first-step run
    _repeats(tmp_path / "bent" / "sweep", [[_step(i, n, apiserver={"heap_inuse_bytes": (1e6 * n + 2e4 * n * n) * w})
                                            for i, n in enumerate((10, 30, 60))] for w in wobble])
    write_lesson_page(memory, tmp_path / "bent")
    assert json.loads((tmp_path / "bent" / LESSON_RESULTS).read_text())["growths"][0]["shape"] == "super-linear"
    _run(tmp_path / "once" / "sweep", [_step(i, n, apiserver={"heap_inuse_bytes": 1e6 * n})
                                       for i, n in enumerate((10, 30, 60))])
    write_lesson_page(memory, tmp_path / "once")
    once = json.loads((tmp_path / "once" / LESSON_RESULTS).read_text())
    assert once["verdict"] == "single run" and once["growths"][0]["shape"].startswith("single run")


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed (apt-get install chromium)")
def test_lesson_page_opens_offline_in_chromium(tmp_path: Path) -> None:
    from tests.browser import Chromium

    quota = lesson_mod.load("etcd-quota")
    _repeats(tmp_path / "small-quota", [[_step(etcd=EtcdStats(alarms=["NOSPACE"]), requests_by_code={"500": 300},
                                               notes=["failures: 120 × POST pods: etcdserver: mvcc: database space "
                                                      "exceeded"])]] * 3)
    _repeats(tmp_path / "headroom", [[_step(requests_by_code={"201": 300})]] * 3)
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
    from loadtests.analysis import saturation
    from loadtests.results.health import ClusterHealth, HealthSample, HealthSummary

    def step(late: float) -> StepResult:
        samples = [HealthSample(t, {"nodes_not_ready": n}) for t, n in ((5, 420), (10, 174), (20, late), (30, 0))]
        found = _step(nodes=100, ramp={"join_s": 13.8},
                      health=ClusterHealth(samples=samples, summary=HealthSummary(nodes_not_ready_max=420)))
        saturation.apply(found, saturation.while_measured(found, cpus=2))
        return found

    joined = step(late=0)
    assert joined.status == "measured"
    assert joined.notes == ["nodes NotReady while joining (up to 420) are the join itself; after it: up to 0"]
    behind = step(late=3)  # NotReady after every joining node was Ready: the fleet fell behind
    assert behind.status == "saturated" and behind.saturation["evidence"].startswith("up to 3 nodes NotReady")


def test_saturation_while_measured_is_decided_again_from_the_recorded_health() -> None:
    """`loadtest report --recompute` decides it from results alone: the same verdict, the note once."""
    from loadtests.analysis import saturation
    from loadtests.results.health import ClusterHealth, HealthSample, HealthSummary

    found = _step(nodes=100, ramp={"join_s": 13.8}, health=ClusterHealth(
        samples=[HealthSample(t, {"nodes_not_ready": n}) for t, n in ((5, 420), (20, 3))],
        summary=HealthSummary(nodes_not_ready_max=420, cpu_machine_max=150.0)))
    found.window = {"opened_at": "2026-12-02T00:00:00Z", "closed_at": "2026-12-02T00:01:00Z"}
    for _ in range(2):
        saturation.apply(found, saturation.while_measured(found, cpus=2))
    assert found.status == "saturated" and found.saturation["evidence"].endswith("machine CPU up to 150 % of 200 %")
    assert len(found.notes) == 1
    found.health.samples[-1].values["nodes_not_ready"] = 0  # recomputed health that held: measured again
    saturation.apply(found, saturation.while_measured(found, cpus=2))
    assert found.status == "measured" and found.saturation == {}


def test_an_effect_against_a_bound_is_a_least_effect() -> None:
    # etcd-disk: fsync on disk measured, on a tmpfs every fsync in the first bucket ("< 1 ms")
    measure = lesson_mod.Measure("etcd WAL fsync p99", "s", "etcd", {"figure": "etcd.wal_fsync_p99_s"},
                                 min_effect=2.0)
    found = compare(measure, [0.0125, 0.0132, 0.0148], [0.001] * 3, "memory", "", "<")
    assert found.verdict == "reproduced" and found.effect_prefix == "≥ "
    assert found.reason.startswith("≥ ×13.20: every run")
    assert compare(measure, [0.0125, 0.0132, 0.0148], [0.004, 0.005, 0.006], "memory").effect_prefix == ""
