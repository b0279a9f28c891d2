"""Locust's entry point: the user classes of the configured scenarios, built from the JSON file named by
LOADTEST_LOAD_CONFIG (written by loadtests.load), exposed at module level where Locust looks for them.

Two additions make the figures complete:
- Locust rewrites <csv prefix>_stats.csv once a second while running, so its last second and the requests
  users make when stopped (their clean-up) can be missing; the final totals are written again at quit to
  <csv prefix>_final_stats.csv and _final_failures.csv (same columns), which loadtests.load prefers.
- A distributed master waits only 0.5 s for its workers' last figures when it quits. So when the run ends,
  the master first asks every worker to stop its users (clean-up included) and send its statistics, and
  waits for each to confirm, before Locust's own quit proceeds.
"""

from __future__ import annotations

import csv
import os
import time
from typing import Any

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from loadtests.scenarios.catalog import SCENARIOS, scenario_params
from loadtests.scenarios.config import FINAL_FAILURES_SUFFIX, FINAL_STATS_SUFFIX, LoadConfig
from loadtests.scenarios.pod_churn import CLEANUP_S

WIND_DOWN = "loadtest_wind_down"
WOUND_DOWN = "loadtest_wound_down"
WIND_DOWN_WAIT_S = CLEANUP_S + 15.0



def build_user_classes(config: LoadConfig) -> list[Any]:
    """The Locust user classes of every configured scenario, each with its exact fixed_count; classes
    with no users are left out (Locust would spawn weight-based users of them otherwise)."""
    classes: list[Any] = []
    for name, params in scenario_params(config.scenarios).items():
        scenario = SCENARIOS[name]
        built = scenario.factory()(config, params, scenario.demand(params, config.nodes).users)
        classes.extend(cls for cls in built if cls.fixed_count > 0)
    return classes


CONFIG = LoadConfig.from_env()
globals().update({cls.__name__: cls for cls in build_user_classes(CONFIG)})

_environment: list[Any] = []
_wound_down: set[str] = set()


def _worker_wind_down(environment: Any, msg: Any, **_: Any) -> None:
    """Worker: stop the users (each runs its on_stop clean-up), report the statistics, confirm."""
    runner = environment.runner
    runner.stop()
    data: dict[str, Any] = {}
    environment.events.report_to_master.fire(client_id=runner.client_id, data=data)
    runner.send_message("stats", data)
    runner.send_message(WOUND_DOWN, {"worker": runner.client_id})


def _master_wound_down(environment: Any, msg: Any, **_: Any) -> None:
    _wound_down.add(str(msg.data.get("worker")))


def _keep_window(environment: Any) -> None:
    """Master or single process: when the runner opens the measured window, restart the statistics (workers
    report deltas, so the master's totals are all there is to reset), then end the run window_s later, the
    way Locust's own --run-time does. WATCH rows keep the connections established while users started."""
    path = CONFIG.window_file
    while not os.path.exists(path):
        gevent.sleep(0.02)
    stats = environment.runner.stats
    for (_name, method), entry in stats.entries.items():
        if method != "WATCH":  # a watch is counted once, when established: keep the step's established watches
            entry.reset()
    stats.total.reset()
    stats.errors.clear()
    gevent.sleep(CONFIG.window_s or 0.0)
    environment.runner.quit()


@events.init.add_listener
def _setup(environment: Any, **_: Any) -> None:
    _environment.append(environment)
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message(WIND_DOWN, _worker_wind_down, concurrent=True)
    elif isinstance(environment.runner, MasterRunner):
        environment.runner.register_message(WOUND_DOWN, _master_wound_down)
    if CONFIG.window_file and not isinstance(environment.runner, WorkerRunner):
        gevent.spawn(_keep_window, environment)


@events.test_stopping.add_listener
def _wind_down_workers(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if not isinstance(runner, MasterRunner):
        return
    workers = {client.id for client in runner.clients.all}
    _wound_down.clear()
    runner.send_message(WIND_DOWN)
    deadline = time.monotonic() + WIND_DOWN_WAIT_S
    while not workers <= _wound_down and time.monotonic() < deadline:
        gevent.sleep(0.1)


@events.quit.add_listener
def _write_final_stats(**_: Any) -> None:
    """After the users have stopped (so their clean-up requests are counted), before Locust exits."""
    if not _environment:
        return
    environment = _environment[0]
    prefix = getattr(environment.parsed_options, "csv_prefix", None)
    if not prefix or isinstance(environment.runner, WorkerRunner):
        return
    writer = StatsCSV(environment, PERCENTILES_TO_REPORT)
    with open(prefix + FINAL_FAILURES_SUFFIX, "w", newline="") as handle:
        writer.failures_csv(csv.writer(handle))
    with open(prefix + FINAL_STATS_SUFFIX, "w", newline="") as handle:  # last: its presence means complete
        writer.requests_csv(csv.writer(handle))
