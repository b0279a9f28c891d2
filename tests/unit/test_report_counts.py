"""The report sets the load generator's request counts beside the apiserver's."""

from __future__ import annotations

from loadtests.kube.retry import RETRIED
from loadtests.report.html import count_rows
from loadtests.results import StepResult
from loadtests.results.loadgen import ClientStat


def _stat(name: str, count: int, kind: str = "") -> ClientStat:
    return ClientStat(type=kind or name.split()[0], name=name, count=count, failures=0, rps=1.0, p50_ms=1.0, p90_ms=1.0,
                      p99_ms=1.0, max_ms=1.0)


def test_client_kinds_of_one_verb_and_resource_are_added_up() -> None:
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=0, started_at="", duration_s=1.0,
                      client=[_stat("LIST pods (rv=0)", 40), _stat("LIST pods (informer, rv=0)", 2),
                              _stat("POST pods", 80), _stat("POST podsx", 5)],
                      server_requests={"LIST pods": 42, "POST pods": 82})
    assert count_rows(step) == [("LIST pods", 42, 42, ""), ("POST pods", 80, 82, "")]


def test_resends_are_counted_once_in_the_requests_own_row_not_again_in_the_retry_row() -> None:
    step = StepResult(index=0, name="s", nodes=1, pods_per_node=0, started_at="", duration_s=1.0,
                      client=[_stat("POST pods", 80), _stat("POST pods", 3, RETRIED)],
                      server_requests={"POST pods": 80})
    assert count_rows(step) == [("POST pods", 80, 80, "")]
