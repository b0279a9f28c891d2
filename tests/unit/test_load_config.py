"""Sizing the load from the plan, the config handed to Locust, request names, and reading Locust's CSVs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loadtests.config import plan as plan_module
from loadtests.config.scenarios import (
    SCENARIOS,
    achieved_rates,
    demands,
    informer_names,
    kubelet_watcher_count,
    poller_names,
    scenario_params,
    user_plan,
)
from loadtests.kube.access import ClusterAccess
from loadtests.kube.names import request_name
from loadtests.load.contract import LoadConfig
from loadtests.load.generator import (
    LoadGenerator,
    LoadGeneratorError,
    StepLoad,
    catches_signal,
    failure_note,
    read_failures_csv,
    read_stats_csv,
)
from loadtests.report.html import step_warnings
from loadtests.results import StepResult
from loadtests.results.loadgen import ClientStat

DATA = Path(__file__).parent / "data"
ACCESS = ClusterAccess(server="https://127.0.0.1:1", kubeconfig="/nonexistent", ca_file="/ca.crt",
                       cert_file="/admin.crt", key_file="/admin.key")


class TestSizing:
    def test_fixed_counts_per_class_from_the_plan(self) -> None:
        load = {"pod_churn": {"rate": 20, "users": 4, "deployment_scale_every_s": 10},
                "kubelet_watchers": {"per_node": 1.0}, "informers": {"count": 3},
                "list_pollers": {"rate": 2, "users": 2}}
        users = user_plan(load, nodes=50)
        assert users.by_class == {"PodChurn": 4, "DeploymentScaler": 1, "KubeletWatcher": 50, "Informer": 3,
                                  "ListPoller": 2}
        assert users.total == 60

    def test_kubelet_watchers_scale_with_nodes_and_are_capped(self) -> None:
        params = scenario_params({"kubelet_watchers": {"per_node": 0.5, "max_watchers": 300}})["kubelet_watchers"]
        assert kubelet_watcher_count(params, 100) == 50
        assert kubelet_watcher_count(params, 5000) == 300
        assert kubelet_watcher_count({**params, "per_node": 2.0}, 7) == 14
        assert kubelet_watcher_count({**params, "per_node": 0.0}, 1000) == 0

    def test_defaults_fill_in_and_zero_rates_need_no_users(self) -> None:
        users = user_plan({"pod_churn": {"rate": 0}, "list_pollers": {"rate": 0}, "informers": {}}, nodes=10)
        assert users.by_class == {"PodChurn": 0, "ListPoller": 0, "Informer": 4}
        assert user_plan({"pod_churn": {"rate": 3, "users": 0}}, 1).by_class == {"PodChurn": 1}

    def test_accepts_the_plan_load_section_either_way(self) -> None:
        parsed = plan_module.parse({"steps": [{"nodes": 5}], "load": {"scenarios": {"informers": {"count": 2}}}})
        assert user_plan(parsed.load, 5).by_class == {"Informer": 2}
        assert user_plan({"scenarios": {"informers": {"count": 2}}}, 5).by_class == {"Informer": 2}

    def test_unknown_scenario_is_refused(self) -> None:
        with pytest.raises(ValueError, match="unknown load scenario 'pod_storm'"):
            user_plan({"pod_storm": {}}, 1)

    def test_spawn_rate_and_command(self, tmp_path: Path) -> None:
        gen = LoadGenerator(StepLoad({"kubelet_watchers": {"max_watchers": 2000}}, nodes=1500, duration_s=59.5,
                                     out_dir=tmp_path, workers=2), ACCESS)
        cmd = gen.command(master_port=5599)
        assert cmd[cmd.index("--users") + 1] == "1500"
        assert cmd[cmd.index("--run-time") + 1] == "60s"
        assert float(cmd[cmd.index("--spawn-rate") + 1]) == 200.0  # capped: 1500 TLS handshakes over ~8 s
        assert cmd[cmd.index("--expect-workers") + 1] == "2" and "127.0.0.1" in cmd
        small = LoadGenerator(StepLoad({"informers": {"count": 3}}, nodes=1, duration_s=5, out_dir=tmp_path), ACCESS)
        assert small.spawn_rate == 50.0 and "--master" not in small.command()


class TestNames:
    def test_request_kinds(self) -> None:
        assert request_name("POST", "pods") == "POST pods"
        assert request_name("LIST", "pods", "", "rv=0") == "LIST pods (rv=0)"
        params = scenario_params({"list_pollers": {"resource_version": ""}})["list_pollers"]
        assert poller_names(params).first == "LIST pods (consistent)"
        assert poller_names({**params, "namespace": "x", "resource_version": "0"}).first == "LIST pods (ns, rv=0)"
        informers = informer_names(scenario_params({"informers": {"resource": "configmaps"}})["informers"])
        assert (informers.first, informers.again) == ("WATCH configmaps (informer)",
                                                      "WATCH configmaps (informer, rewatch)")
        assert informers.initial_list is not None and informers.initial_list.first == "LIST configmaps (informer, rv=0)"


class TestConfig:
    def test_round_trip_through_json(self) -> None:
        config = LoadConfig(access=ACCESS, scenarios=scenario_params({"informers": {}}), nodes=3, run_id="Smoke_1",
                            workers=2, stop_at=123.0)
        back = LoadConfig.from_dict(json.loads(json.dumps(config.to_dict())))
        assert back == config
        assert back.node(0) == "kwok-node-00000" and back.node(4) == "kwok-node-00001"
        assert back.run_label() == "smoke-1"

    def test_node_names_by_list_or_prefix(self) -> None:
        data = LoadConfig(access=ACCESS, scenarios={}, nodes=2).to_dict()
        assert LoadConfig.from_dict({**data, "node_names": ["a", "b"]}).node(3) == "b"
        by_prefix = LoadConfig.from_dict({**data, "node_names": {"prefix": "n-", "count": 3}})
        assert [by_prefix.node(i) for i in range(4)] == ["n-00000", "n-00001", "n-00002", "n-00000"]

    def test_config_file_is_private(self, tmp_path: Path) -> None:
        gen = LoadGenerator(StepLoad({"informers": {}}, nodes=1, duration_s=5, out_dir=tmp_path, run_id="r"), ACCESS)
        path = gen._write_config()
        assert path.stat().st_mode & 0o777 == 0o600
        assert LoadConfig.from_dict(json.loads(path.read_text())).access == ACCESS


LOCUST_CRASH = """[2025-11-28 10:00:00,000] host/INFO/locust.main: Starting Locust 2.40.0
[2025-11-28 10:00:01,000] host/CRITICAL/locust.runners: Unhandled exception in greenlet: <Greenlet: spawn>
Traceback (most recent call last):
  File "src/gevent/greenlet.py", line 906, in gevent._gevent_cgreenlet.Greenlet.run
  File "/x/locustfile.py", line 12, in spawn
    raise ValueError("bad scenario")
ValueError: bad scenario
[2025-11-28 10:00:01,100] host/INFO/locust.main: Shutting down (exit code 2)
Type     Name  # reqs  # fails
--------|-----|-------|-------
         Aggregated  0  0(0.00%)
"""


class TestLocustFails:
    """A Locust that fails is said in one line: how it ended, the cause its log gives, and where the log is;
    the log's tail stays in the log (kept with the step's results), not in the line."""

    def _failed(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> str:
        def fake_locust(_cmd: list[str], log: object, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
            return subprocess.Popen([sys.executable, "-c", script], stdout=log, stderr=subprocess.STDOUT, cwd=cwd)

        monkeypatch.setattr("loadtests.load.generator.locust_spawn", fake_locust)
        gen = LoadGenerator(StepLoad({"informers": {"count": 1}}, nodes=1, duration_s=5, out_dir=tmp_path), ACCESS)
        gen.start()
        with pytest.raises(LoadGeneratorError) as failed:
            gen.wait(timeout=60)
        return str(failed.value)

    def test_a_crash_is_one_line_naming_its_exception_and_the_log(self, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        said = self._failed(tmp_path, monkeypatch, f"import sys; sys.stdout.write({LOCUST_CRASH!r}); sys.exit(2)")
        assert said == ("Locust exited (code 2): Unhandled exception in greenlet: <Greenlet: spawn>: ValueError: bad "
                        f"scenario; full log: {tmp_path / 'locust.log'}")
        assert "Aggregated" in (tmp_path / "locust.log").read_text()  # the tail stays in the log

    def test_a_silent_end_names_the_last_line_and_the_log(self, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        said = self._failed(tmp_path, monkeypatch, "import os; print('starting', flush=True); os.kill(os.getpid(), 9)")
        assert said == f"Locust killed by SIGKILL; its log ends: starting; full log: {tmp_path / 'locust.log'}"

    def test_no_statistics_is_one_line_too(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        said = self._failed(tmp_path, monkeypatch, "print('All users spawned')")
        assert said.startswith("Locust wrote no statistics (") and "\n" not in said, said
        assert said.endswith(f"; its log ends: All users spawned; full log: {tmp_path / 'locust.log'}"), said


class TestStatsCsv:
    def test_recorded_locust_stats(self) -> None:
        client, total = read_stats_csv(DATA / "locust_stats_recorded.csv")
        by_name = {c.name: c for c in client}
        assert total is not None and total.name == "Aggregated" and total.type == ""
        assert total.count == sum(c.count for c in client)
        assert "Aggregated" not in by_name
        post = by_name["POST pods"]
        assert (post.type, post.count, post.failures) == ("POST", 50, 0)
        assert post.p50_ms is not None and post.p99_ms is not None and post.p50_ms <= post.p99_ms <= 30
        assert post.max_ms is not None and post.avg_ms is not None and post.rps > 9
        assert by_name["LIST pods (informer, rv=0)"].type == "LIST"  # a quoted name with a comma

    def test_failures_and_not_available_values(self, tmp_path: Path) -> None:
        header = (DATA / "locust_stats_recorded.csv").read_text().splitlines()[0]
        path = tmp_path / "stats.csv"
        path.write_text(header + "\nWATCH,WATCH pods (node),0,0,0,0,0,0,0,0.0,0.0" + ",N/A" * 11 + "\n"
                        + ",Aggregated,0,0,0,0,0,0,0,0.0,0.0" + ",N/A" * 11 + "\n")
        client, total = read_stats_csv(path)
        assert client[0].p50_ms is None and client[0].count == 0 and total is not None and total.p99_ms is None
        failures = read_failures_csv(DATA / "locust_failures_recorded.csv")
        assert failures[0].count >= failures[-1].count and "ConnectionRefusedError" in failures[0].error
        note = failure_note(ClientStat("", "Aggregated", 25, 25, 1.0, 1, 1, 1, 1), failures)
        assert note and note[0].startswith("load: 25 of 25 requests failed (100.0%); most frequent: POST pods")

    def test_a_file_that_is_not_locust_stats_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "x.csv"
        path.write_text("a,b\n1,2\n")
        with pytest.raises(Exception, match="not a Locust stats file"):
            read_stats_csv(path)


def stat(type_: str, name: str, count: int, failures: int = 0) -> ClientStat:
    return ClientStat(type_, name, count, failures, 0.0, None, None, None, None)


class TestAchieved:
    LOAD = {"pod_churn": {"rate": 10.0}, "list_pollers": {"rate": 2.0}, "kubelet_watchers": {}}

    def test_asked_vs_achieved(self) -> None:
        client = [stat("POST", "POST pods", 600, 10), stat("LIST", "LIST pods (rv=0)", 120),
                  stat("LIST", "LIST pods (continue)", 500), stat("WATCH", "WATCH pods (node)", 20),
                  stat("WATCH", "WATCH pods (node, rewatch)", 40)]
        rates = achieved_rates(self.LOAD, nodes=20, duration_s=60, client=client)
        by = {r.scenario: r for r in rates}
        assert (by["pod_churn"].asked_per_s, by["pod_churn"].achieved_per_s, by["pod_churn"].unit) == (10, 9.833,
                                                                                                       "creates")
        assert (by["list_pollers"].achieved_per_s, by["kubelet_watchers"].achieved_per_s) == (2.0, 20.0)
        assert by["kubelet_watchers"].unit == "watches" and by["kubelet_watchers"].asked_per_s == 20
        step = StepResult(0, "20 nodes", 20, 0, "", 60, rates=rates)
        assert [w.text for w in step_warnings(step)] == []

    def test_the_report_warns_below_ninety_percent(self) -> None:
        client = [stat("POST", "POST pods", 500), stat("WATCH", "WATCH pods (node)", 20, failures=5)]
        step = StepResult(0, "20 nodes", 20, 0, "", 60,
                          rates=achieved_rates(self.LOAD, nodes=20, duration_s=60, client=client))
        texts = [w.text for w in step_warnings(step)]
        assert len(texts) == 3
        assert texts[0].startswith("scenario pod_churn achieved 8.33 creates/s of 10.00 asked (83%)")
        assert "kubelet_watchers achieved 15.00 watches of 20.00 asked" in texts[2]

    def test_demands_say_what_counts(self) -> None:
        assert demands({"informers": {"count": 2}}, 1)["informers"].counted_by == ("WATCH", "WATCH pods (informer)")


def test_the_runner_side_never_imports_locust() -> None:
    """Importing Locust monkey-patches the process for gevent: the runner must stay free of it."""
    code = ("import sys, loadtests.load.generator, loadtests.config.scenarios, loadtests.load.locust.transport, "
            "loadtests.kube.reflector; print('locust' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_declared_scenario_has_its_code_and_no_other() -> None:
    """config/ declares scenarios by name; the Locust side's registry holds their code under the same names. Read
    in a child process: the registry imports Locust, which patches the process it is imported into for gevent."""
    code = ("import json; from loadtests.load.locust.scenarios.registry import BUILDS; "
            "print(json.dumps({name: callable(build) for name, build in BUILDS.items()}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    builds = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(set(SCENARIOS) - set(builds)) == [], "declared in config/scenarios.py, no code in the registry"
    assert sorted(set(builds) - set(SCENARIOS)) == [], "code in the registry, not declared in config/scenarios.py"
    assert all(builds.values()), builds


def test_the_window_signal_goes_only_to_a_process_that_listens_for_it() -> None:
    """Until its handler is in place a signal's default action would end Locust: the runner asks first."""
    # whatever an earlier test's main() installed is put back afterwards, and is not what this test asks about
    previous = signal.signal(signal.SIGUSR2, lambda *_: None)
    try:
        assert catches_signal(os.getpid(), signal.SIGUSR2)
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)
        assert not catches_signal(os.getpid(), signal.SIGUSR2)
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert not catches_signal(2**22 + 1, signal.SIGUSR2)  # no such process
