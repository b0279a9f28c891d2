"""Locust's entry point: the user classes of the configured scenarios, built from the JSON file named by
LOADTEST_LOAD_CONFIG (written by loadtests.load.generator), exposed at module level where Locust looks for them.

Two additions make the figures complete:
- Locust rewrites <csv prefix>_stats.csv once a second while running, so its last second and the requests
  users make when stopped (their clean-up) can be missing; the final totals are written again at quit to
  <csv prefix>_final_stats.csv and _final_failures.csv (same columns), which loadtests.load.generator prefers.
- A distributed master waits only 0.5 s for its workers' last figures when it quits. So when the run ends,
  the master first asks every worker to stop its users (clean-up included) and send its statistics, and
  waits for each to confirm, before Locust's own quit proceeds.
- The measured window closes when the runner says (its end scrape of the apiserver): the master asks every
  worker for its figures so far, writes them to <csv prefix>_window_stats.csv and _window_failures.csv, and
  only then quits; so the users' stop (cut watches, clean-up) is in neither side's figures.
- Workers of other machines (`loadtest worker`) get the step's configuration from the master, minus the
  credentials, and every worker's share of the window is kept per worker (loadtests/load/locust/worker_link.py).
"""

from __future__ import annotations

import csv
import os
import time
from typing import Any

import gevent
from gevent.event import Event
from locust import events
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from loadtests.config.scenarios import SCENARIOS, scenario_params
from loadtests.load.contract import (
    FINAL_FAILURES_SUFFIX,
    FINAL_STATS_SUFFIX,
    WINDOW_FAILURES_SUFFIX,
    WINDOW_LOOK_S,
    WINDOW_SIGNAL,
    WINDOW_STATS_SUFFIX,
    WINDOW_WORKERS_SUFFIX,
    LoadConfig,
)
from loadtests.load.locust import worker_link
from loadtests.load.locust.scenarios.pod_churn import CLEANUP_S
from loadtests.load.locust.scenarios.registry import BUILDS
from loadtests.load.locust.window import WINDOW
from loadtests.polling import poll_until

_window_wake = Event()  # set by WINDOW_SIGNAL: the runner made a window file
WIND_DOWN = "loadtest_wind_down"
WOUND_DOWN = "loadtest_wound_down"
WIND_DOWN_WAIT_S = CLEANUP_S + 15.0
CLOSE_WINDOW = "loadtest_close_window"
OPEN_WINDOW = "loadtest_open_window"
WINDOW_CLOSED = "loadtest_window_closed"  # a worker's answer to either: its figures up to now are sent
CLOSE_WAIT_S = 10.0  # for every worker's figures up to the close
CLOSE_CAP_S = 120.0  # a runner that never closes the window (it died): end the run this long after window_s



def build_user_classes(config: LoadConfig) -> list[Any]:
    """The Locust user classes of every configured scenario, each with its exact fixed_count; classes
    with no users are left out (Locust would spawn weight-based users of them otherwise). The config names
    each scenario; its code is the registry's entry of that name."""
    classes: list[Any] = []
    for name, params in scenario_params(config.scenarios).items():
        built = BUILDS[name](config, params, SCENARIOS[name].demand(params, config.nodes).users)
        classes.extend(cls for cls in built if cls.fixed_count > 0)
    return classes


# a worker of another machine learns the step from its master (worker_link); until then it has one idle class
REMOTE = worker_link.remote_setup()
CONFIG = LoadConfig.from_env() if REMOTE is None else None
if CONFIG is not None:
    globals().update({cls.__name__: cls for cls in build_user_classes(CONFIG)})
else:
    AwaitingConfig = worker_link.AwaitingConfig
LEDGER = worker_link.WorkerLedger(CONFIG) if CONFIG is not None else None

_environment: list[Any] = []
_wound_down: set[str] = set()
_closed: set[str] = set()


def _report_now(runner: Any) -> None:
    """Worker: send the statistics gathered so far to the master now, not at the next interval."""
    data: dict[str, Any] = {}
    _environment[0].events.report_to_master.fire(client_id=runner.client_id, data=data)
    runner.send_message("stats", data)


def _worker_close_window(environment: Any, msg: Any, **_: Any) -> None:
    """Worker: report the figures up to the window's opening or close (users keep running), confirm."""
    runner = environment.runner
    _report_now(runner)
    runner.send_message(WINDOW_CLOSED, {"worker": runner.client_id})


def _worker_open_window(environment: Any, msg: Any, **_: Any) -> None:
    """Worker: the window opened (its users' timelines start now); report and confirm as at its close."""
    WINDOW.open()
    _worker_close_window(environment, msg)


def _master_window_closed(environment: Any, msg: Any, **_: Any) -> None:
    _closed.add(str(msg.data.get("worker")))


def _worker_wind_down(environment: Any, msg: Any, **_: Any) -> None:
    """Worker: stop the users (each runs its on_stop clean-up), report the statistics, confirm."""
    runner = environment.runner
    runner.stop()
    _report_now(runner)
    runner.send_message(WOUND_DOWN, {"worker": runner.client_id})


def _master_wound_down(environment: Any, msg: Any, **_: Any) -> None:
    _wound_down.add(str(msg.data.get("worker")))


def _wait_for_file(path: str, timeout_s: float | None) -> bool:
    """Until the runner makes `path` (or timeout_s passes): woken by its WINDOW_SIGNAL at once, else a look every
    WINDOW_LOOK_S (a signal sent before the handler was in place)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not os.path.exists(path):
        left = WINDOW_LOOK_S if deadline is None else min(WINDOW_LOOK_S, deadline - time.monotonic())
        if left <= 0:
            return False
        _window_wake.wait(left)
        _window_wake.clear()
    return True


def _keep_window(environment: Any) -> None:
    """Master or single process: when the runner opens the measured window, restart the statistics (workers
    report deltas, so the master's totals are all there is to reset), then end the run window_s later, the
    way Locust's own --run-time does. WATCH rows keep the connections established while users started."""
    assert CONFIG is not None and CONFIG.window_file is not None and LEDGER is not None
    _wait_for_file(CONFIG.window_file, None)
    WINDOW.open()
    if isinstance(environment.runner, MasterRunner):
        # every worker's figures up to now first: reset with the rest, they are not the window's
        _ask_workers(environment.runner, OPEN_WINDOW, _closed, CLOSE_WAIT_S)
    stats = environment.runner.stats
    for (_name, method), entry in stats.entries.items():
        if method != "WATCH":  # a watch is counted once, when established: keep the step's established watches
            entry.reset()
    stats.total.reset()
    stats.errors.clear()
    LEDGER.open_window()
    close = CONFIG.window_close_file
    if close is None:
        gevent.sleep(CONFIG.window_s or 0.0)
    else:
        _wait_for_file(close, (CONFIG.window_s or 0.0) + CLOSE_CAP_S)
        _write_window_stats(environment)
    environment.runner.quit()
    if environment.web_ui is not None:  # the live view ends with the step (its server keeps Locust running)
        environment.web_ui.stop()


def _write_window_stats(environment: Any) -> None:
    """The statistics as they stand at the window's close, every worker's included, before any user stops."""
    if isinstance(environment.runner, MasterRunner):
        _ask_workers(environment.runner, CLOSE_WINDOW, _closed, CLOSE_WAIT_S)
        _write_workers(environment)
    _write_stats(environment, WINDOW_STATS_SUFFIX, WINDOW_FAILURES_SUFFIX)


def _write_workers(environment: Any) -> None:
    """Master: each worker's share of the window (or why the step could not start), frozen from now on."""
    prefix = getattr(environment.parsed_options, "csv_prefix", None)
    if LEDGER is not None and prefix and not LEDGER.window_closed:
        LEDGER.window_closed = True
        LEDGER.write(prefix + WINDOW_WORKERS_SUFFIX)


def _ask_workers(runner: Any, message: str, confirmed: set[str], wait_s: float) -> None:
    """Master: send `message` to every worker and wait (at most wait_s) until each has confirmed it; their
    statistics arrive before their confirmation, on the same connection."""
    workers = {client.id for client in runner.clients.all if client.state != STATE_MISSING}  # lost: no answer
    confirmed.clear()
    runner.send_message(message)
    poll_until(lambda: workers <= confirmed, wait_s, interval_s=0.02)


@events.init.add_listener
def _setup(environment: Any, **_: Any) -> None:
    _environment.append(environment)
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        runner.register_message(WIND_DOWN, _worker_wind_down, concurrent=True)
        runner.register_message(CLOSE_WINDOW, _worker_close_window, concurrent=True)
        runner.register_message(OPEN_WINDOW, _worker_open_window, concurrent=True)
        label = REMOTE.label if REMOTE is not None else worker_link.local_label()
        environment.events.report_to_master.add_listener(
            lambda client_id, data, **_: worker_link.worker_report(data, label))
        if REMOTE is not None:
            worker_link.join_as_remote_worker(environment, REMOTE, build_user_classes)
    elif isinstance(runner, MasterRunner) and LEDGER is not None:
        ledger = LEDGER
        runner.register_message(WOUND_DOWN, _master_wound_down)
        runner.register_message(WINDOW_CLOSED, _master_window_closed)
        runner.register_message(worker_link.HELLO, lambda msg, **_: worker_link.master_hello(ledger, runner, msg))
        runner.register_message(worker_link.CONFIGURED, lambda msg, **_: worker_link.master_configured(ledger, msg))
        environment.events.worker_report.add_listener(lambda client_id, data, **_: ledger.on_report(client_id, data))
        gevent.spawn(ledger.watch, runner)
    if environment.web_ui is not None:
        worker_link.read_only(environment.web_ui)
    if CONFIG is not None and CONFIG.window_file and not isinstance(runner, WorkerRunner):
        gevent.signal_handler(WINDOW_SIGNAL, _window_wake.set)
        gevent.spawn(_keep_window, environment)


@events.test_start.add_listener
def _configure_remote_workers(environment: Any, **_: Any) -> None:
    """Master: no spawn job before every worker of another machine has this step's configuration."""
    if isinstance(environment.runner, MasterRunner) and CONFIG is not None and CONFIG.remote_workers:
        assert LEDGER is not None
        worker_link.wait_for_remote_workers(LEDGER, environment.runner, CONFIG.remote_wait_s)


@events.test_stopping.add_listener
def _wind_down_workers(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        _ask_workers(environment.runner, WIND_DOWN, _wound_down, WIND_DOWN_WAIT_S)


@events.quit.add_listener
def _write_final_stats(**_: Any) -> None:
    """After the users have stopped (so their clean-up requests are counted), before Locust exits."""
    if _environment:
        if isinstance(_environment[0].runner, MasterRunner):
            _write_workers(_environment[0])  # unless the window's close wrote them
        _write_stats(_environment[0], FINAL_STATS_SUFFIX, FINAL_FAILURES_SUFFIX)


def _write_stats(environment: Any, stats_suffix: str, failures_suffix: str) -> None:
    """Locust's statistics CSVs under the run's csv prefix (master or single process only)."""
    prefix = getattr(environment.parsed_options, "csv_prefix", None)
    if not prefix or isinstance(environment.runner, WorkerRunner):
        return
    writer = StatsCSV(environment, PERCENTILES_TO_REPORT)
    with open(prefix + failures_suffix, "w", newline="") as handle:
        writer.failures_csv(csv.writer(handle))
    with open(prefix + stats_suffix, "w", newline="") as handle:  # last: its presence means complete
        writer.requests_csv(csv.writer(handle))
