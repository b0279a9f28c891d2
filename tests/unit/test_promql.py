"""The plan's PromQL figures and checks: parsing and refusals, the placeholder, values from series, verdicts, and
queries Prometheus cannot parse refused by promtool before a run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from loadtests.analysis import rules
from loadtests.analysis.promql import judge
from loadtests.binaries.prometheus import find_prometheus, prometheus_set, provide_prometheus
from loadtests.config import plan as plan_mod
from loadtests.config import promql
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.prometheus import config
from loadtests.errors import PlanError, SetupError
from loadtests.kube.access import ClusterAccess
from loadtests.results import RunResult, StepResult, from_dict, to_dict
from loadtests.results.promql import NOT_FIRED, PromFigure, PromqlSection, PromWindow
from loadtests.run.promql import coverage, one_value, refuse_unparsable

STEPS = {"steps": [{"nodes": 1}]}
ON = {"prometheus": {"enabled": True}}


def parse(**sections: object) -> plan_mod.Plan:
    return plan_mod.parse({**STEPS, **sections}, source="plan.yaml")


def refused(**sections: object) -> str:
    with pytest.raises(PlanError) as error:
        parse(**sections)
    return str(error.value)


def test_figures_and_checks_parse_and_leave_other_plans_as_they_were() -> None:
    found = parse(**ON, figures=[{"name": "a", "query": "sum(rate(x[%v]))", "unit": "s", "rule": "latency"}],
                  checks=[{"name": "c", "query": "max(up)", "min": 1}])
    assert found.figures[0].for_window(60.25) == "sum(rate(x[60250ms]))"
    assert found.checks[0].min == 1 and not found.checks[0].alert
    assert {"prometheus", "figures", "checks"} <= set(found.to_dict())
    assert not {"prometheus", "figures", "checks"} & set(parse().to_dict())  # the same digest and file as before


@pytest.mark.parametrize(("sections", "said"), [
    ({"figures": [{"name": "a", "query": "up"}]}, "figures: PromQL needs a Prometheus"),
    ({**ON, "checks": [{"name": "c", "query": "up"}]}, "checks[0]: check 'c' needs a threshold"),
    ({**ON, "figures": [{"name": "a", "query": "up"}, {"name": "a", "query": "up"}]}, "'a' names two entries"),
    ({**ON, "figures": [{"name": "a", "query": " "}]}, "figures[0].query: must be a non-empty string"),
    ({**ON, "figures": [{"name": "a", "query": "up", "aggregate": "median"}]}, "figures[0].aggregate: must be one"),
    ({**ON, "figures": [{"name": "a", "query": "up", "max": 1}]}, "figures[0].max: unknown field"),
    ({**ON, "checks": [{"name": "c", "query": "up", "max": "1"}]}, "checks[0].max: must be a number"),
    ({**ON, "figures": {"profile": "/no/such.yml"}}, "figures.profile: cannot read /no/such.yml"),
    ({**ON, "figures": {"file": "x"}}, "figures: must be a list of entries, or {profile: FILE}"),
    ({"prometheus": {"enabled": True, "scrape_interval_s": 0}}, "prometheus.scrape_interval_s: must be"),
    ({"prometheus": {"enabled": "yes"}}, "prometheus.enabled: must be true or false"),
    ({"prometheus": {"enabled": True, "port": 9090}}, "prometheus.port: unknown field"),
])
def test_bad_sections_are_refused_in_one_line(sections: dict, said: str) -> None:
    assert said in refused(**sections)


def test_prometheus_is_for_local_control_planes_only() -> None:
    said = refused(**ON, target={"kind": "cluster", "kubeconfig": "k"})
    assert "prometheus.enabled" in said and "target.kind: local" in said


def test_kube_burner_profiles_are_read_as_they_are(tmp_path: Path) -> None:
    (tmp_path / "metrics.yml").write_text(yaml.safe_dump([
        {"query": "sum(x[{{ .elapsed }}:])", "metricName": "xSum", "instant": True, "captureStart": False}]))
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump([
        {"expr": "up == 0", "description": "a target is down", "severity": "critical"}]))
    found = plan_mod.parse({**STEPS, **ON, "figures": {"profile": "metrics.yml"}, "checks": {"profile": "alerts.yml"}},
                           source=str(tmp_path / "plan.yaml"))
    assert found.figures[0].name == "xSum" and found.figures[0].for_window(30) == "sum(x[30000ms:])"
    check = found.checks[0]
    assert (check.name, check.query, check.severity, check.alert) == ("a target is down", "up == 0", "critical", True)
    (tmp_path / "bad.yml").write_text(yaml.safe_dump([{"metricName": "noQuery"}]))
    with pytest.raises(PlanError, match=r"figures \(.*bad.yml\)\[0\].query: must be a non-empty string"):
        plan_mod.parse({**STEPS, **ON, "figures": {"profile": "bad.yml"}}, source=str(tmp_path / "plan.yaml"))


def test_the_rules_are_compare_s_own() -> None:
    assert promql.RULES == rules.RULES


def test_no_series_is_not_measured_and_several_need_an_aggregate() -> None:
    query = promql.PromQuery("a", "up")
    assert one_value(query, []) == (None, "no series: not measured")
    value, why = one_value(query, [({"__name__": "up", "job": "etcd"}, 1.0), ({"job": "kwok"}, 0.0)])
    assert value is None and "2 series (job=etcd; job=kwok)" in why and "aggregate" in why
    assert one_value(promql.PromQuery("a", "up", aggregate="min"), [({}, 1.0), ({}, 0.0)]) == (0.0, "")
    assert one_value(promql.PromQuery("a", "up", aggregate="avg"), [({}, 1.0), ({}, 0.0)]) == (0.5, "")


@pytest.mark.parametrize(("check", "found", "passed"), [
    (promql.PromQuery("c", "q", max=1), PromFigure("c", "check", "q", 0.5, 1), True),
    (promql.PromQuery("c", "q", max=1), PromFigure("c", "check", "q", 1.5, 1), False),
    (promql.PromQuery("c", "q", min=1, max=2), PromFigure("c", "check", "q", 0.5, 1), False),
    (promql.PromQuery("c", "q", max=1), PromFigure("c", "check", "q", None, 0, "no series: not measured"), None),
    (promql.PromQuery("c", "q", severity="error"), PromFigure("c", "check", "q", None, 0, NOT_FIRED), True),
    (promql.PromQuery("c", "q", severity="error"), PromFigure("c", "check", "q", 3.0, 1), False),
    (promql.PromQuery("c", "q", severity="warning"), PromFigure("c", "check", "q", 3.0, 1), None),
    (promql.PromQuery("c", "q", severity="error"), PromFigure("c", "check", "q", None, 0, "prometheus: down"), None),
])
def test_checks_are_judged_like_slos(check: promql.PromQuery, found: PromFigure, passed: bool | None) -> None:
    assert judge(check, found).passed is passed


def test_the_section_survives_results_json() -> None:
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=0, started_at="t", duration_s=1.0)
    step.put(PromqlSection([PromFigure("a", "figure", "up", 1.0, 1)], PromWindow("t", 60.0, 5.0, 5, 0.4, 59.1)))
    run = RunResult(run_id="r", plan={}, environment={}, steps=[step])
    back = from_dict(to_dict(run)).steps[0]
    assert back.promql == step.promql and back.promql_window == step.promql_window
    assert "from +0.4 s to +59.1 s of the 60.0 s window" in back.promql_window.said()


class Scrapes:
    """Prometheus's scrape times of two targets, as its API gives them."""

    def scrape_times(self, at: float, seconds: float) -> dict[str, list[float]]:
        return {"etcd/etcd": [99.0, 101.0, 103.0, 105.0, 107.0, 109.0],
                "kwok/kwok": [100.5, 102.5, 104.5, 106.5, 108.5, 110.5]}


def test_the_window_prometheus_covers_is_the_latest_first_and_earliest_last_scrape() -> None:
    window = coverage(Scrapes(), 100.0, 110.0, 2.0)  # type: ignore[arg-type]
    assert (window.targets, window.first_scrape_s, window.last_scrape_s) == (2, 1.0, 8.5)


@pytest.mark.skipif(not prometheus_set().is_cached(), reason="promtool not provided here (make setup)")
def test_a_query_prometheus_cannot_parse_is_refused_naming_it_and_prometheus_s_words() -> None:
    promtool = prometheus_set().path("promtool")
    good = promql.PromQuery("fine", "sum(rate(apiserver_request_total[%v]))")
    refuse_unparsable([good], promtool, "plan.yaml")  # accepted, the placeholder a duration
    bad = promql.PromQuery("broken", "sum(rate(x[%v])", profile="m.yml")
    with pytest.raises(PlanError) as error:
        refuse_unparsable([good, bad], promtool, "plan.yaml")
    said = str(error.value)
    assert "PromQL 'broken' (from m.yml)" in said and "sum(rate(x[%v])" in said and "unclosed left parenthesis" in said


def test_setup_without_apt_says_so_in_one_line_and_a_plan_asking_for_prometheus_is_told_to_run_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where apt cannot fetch Prometheus (here: none at all) still sets up; only its plans cannot run."""
    monkeypatch.setenv("LOADTEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get, apt-cache or dpkg
    said: list[str] = []
    assert provide_prometheus(log=said.append) is False
    assert len(said) == 1 and said[0].startswith("prometheus ") and "not provided (apt-get not found" in said[0]
    with pytest.raises(SetupError, match="missing from .* run: make setup"):
        find_prometheus()


def test_prometheus_verifies_the_apiservers_as_the_harness_does_and_presents_the_admins_certificate() -> None:
    access = ClusterAccess(server="https://127.0.0.1:6443", kubeconfig="", ca_file="/c/pki/ca.crt",
                           cert_file="/c/pki/admin.crt", key_file="/c/pki/admin.key")
    info = TargetInfo(access=access, etcd_metrics_url="http://127.0.0.1:2381/metrics",
                      metrics_urls={"kube-scheduler": "https://127.0.0.1:10259/metrics"})
    credentials = {"cert_file": access.cert_file, "key_file": access.key_file}
    found = config(info, promql.PrometheusSettings(enabled=True, scrape_interval_s=2), credentials)
    jobs = {job["job_name"]: job for job in found["scrape_configs"]}
    assert jobs["kube-apiserver/kube-apiserver"]["tls_config"] == {"ca_file": "/c/pki/ca.crt", **credentials}
    # the scheduler's serving certificate is its own, self-signed on loopback
    assert jobs["kube-scheduler/kube-scheduler"]["tls_config"] == {"insecure_skip_verify": True, **credentials}
    assert "tls_config" not in jobs["etcd/etcd"] and found["global"]["scrape_interval"] == "2000ms"
