"""What the run's own Prometheus costs the machine: the default plan run with `prometheus: {enabled: true}` (its
default scrape interval) and without, side by side.

Prometheus is a component of the run, so each step's results hold its CPU (% of one core, the kernel's counters
over the measured window) and memory (RSS, the largest sample) as they hold kube-apiserver's; this reads them from
the run's own results, beside kube-apiserver's CPU and the machine's. The runs without Prometheus say what it
adds that its own row does not hold (kube-apiserver and the others serving its scrapes): runs alternate
(without-with, with-without, ...) on fresh control planes, so a steady drift of the machine falls on both sides.
Every run's results.json is kept gzip-compressed in benchmarks/results/raw/prometheus_cost/; `--from-raw`
rebuilds the table from them.

    .venv/bin/python benchmarks/prometheus_cost.py [--pairs 1] [--plan default]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.pairs import second_first  # noqa: E402
from benchmarks.plan_runs import run_loadtest  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.config import plan as plan_mod  # noqa: E402
from loadtests.config.promql import PrometheusSettings  # noqa: E402
from loadtests.controlplane.prometheus import COMPONENT  # noqa: E402
from loadtests.results import RunResult, StepResult  # noqa: E402

RAW = "prometheus_cost"  # under benchmarks/results/raw/
MIB = 2**20


@dataclass
class Measured:
    """One run: with or without the run's Prometheus, its results and exit code."""

    prometheus: bool
    results: RunResult
    exit_code: int


def plan_file(folder: Path, plan: str, prometheus: bool) -> Path:
    """The plan as it is, its `prometheus` section on (the default interval) or off, written into folder."""
    source = Path(plan) if Path(plan).exists() else plan_mod.PLANS_DIR / f"{plan}.yaml"
    data = yaml.safe_load(source.read_text())
    data["prometheus"] = {"enabled": prometheus}
    path = folder / f"{plan}-prometheus-{'on' if prometheus else 'off'}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_once(folder: Path, plan: str, prometheus: bool, index: int) -> Measured:
    out = folder / f"run-{index}-{'on' if prometheus else 'off'}"
    done = run_loadtest(["run", "--plan", str(plan_file(folder, plan, prometheus)), "--no-gate"], out)
    return Measured(prometheus, done.results, done.exit_code)


def keep(runs: list[Measured], command: str) -> None:
    for old in (RAW_DIR / RAW).glob("*.json.gz"):  # an earlier measurement's runs
        old.unlink()
    for index, run in enumerate(runs, 1):
        keep_raw(f"{RAW}/run-{index}.json.gz", {"prometheus": run.prometheus, "exit_code": run.exit_code,
                                                "command": command, "results": results.to_dict(run.results)})


def read_raw() -> tuple[list[Measured], str]:
    """The kept runs, and the command that measured them."""
    found, command = [], ""
    for path in sorted((RAW_DIR / RAW).glob("run-*.json.gz"), key=lambda p: int(p.name.split("-")[1].split(".")[0])):
        data = json.loads(gzip.decompress(path.read_bytes()))
        command = data.get("command", command)
        found.append(Measured(data["prometheus"], results.from_dict(data["results"]), data["exit_code"]))
    if not found:
        raise SystemExit(f"{RAW_DIR / RAW}: no kept runs; run the benchmark without --from-raw first")
    return found, command


def cpu(step: StepResult, component: str) -> float | None:
    found = [p.cpu_percent for p in step.processes if p.component == component]
    return sum(found) if found else None


def rss_max(step: StepResult, component: str) -> int | None:
    found = [p.rss_max_bytes for p in step.processes if p.component == component]
    return sum(found) if found else None


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f} %"


def _mib(value: int | None) -> str:
    return "not measured" if value is None else f"{value / MIB:.0f} MiB"


def rows(runs: list[Measured]) -> list[str]:
    lines = []
    for index, run in enumerate(runs, 1):
        for step in run.results.steps:
            own = (_pct(cpu(step, COMPONENT)), _mib(rss_max(step, COMPONENT))) if run.prometheus else ("off", "off")
            lines.append(f"| {index} | {'on' if run.prometheus else 'off'} | {step.nodes:,} | {own[0]} | {own[1]} | "
                         f"{_pct(cpu(step, 'kube-apiserver'))} | {_pct(step.machine_cpu_percent)} |")
    return lines


def _side(runs: list[Measured], index: int, read: Callable[[StepResult], float | None]) -> float | None:
    """The median of one figure of the index-th step over the runs (None: measured in none)."""
    found = [value for run in runs if index < len(run.results.steps)
             if (value := read(run.results.steps[index])) is not None]
    return statistics.median(found) if found else None


def summary(runs: list[Measured]) -> list[str]:
    """Per step: Prometheus's own CPU and memory (the median over the runs with it), and what the machine and
    kube-apiserver spent with it beside without it (medians of each side)."""
    with_it = [r for r in runs if r.prometheus]
    without = [r for r in runs if not r.prometheus]
    lines = []
    for index, step in enumerate(with_it[0].results.steps if with_it else []):
        own_cpu = _side(with_it, index, lambda s: cpu(s, COMPONENT))
        own_rss = _side(with_it, index, lambda s: rss_max(s, COMPONENT))
        line = (f"- {step.nodes:,} nodes: Prometheus {_pct(own_cpu)} of one core, "
                f"{_mib(None if own_rss is None else int(own_rss))} RSS at most")
        machine = [_side(side, index, lambda s: s.machine_cpu_percent) for side in (with_it, without)]
        apiserver = [_side(side, index, lambda s: cpu(s, "kube-apiserver")) for side in (with_it, without)]
        if without:
            line += (f"; the machine {_pct(machine[0])} with it, {_pct(machine[1])} without (kube-apiserver "
                     f"{_pct(apiserver[0])} and {_pct(apiserver[1])})")
        lines.append(line + ".")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="default")
    parser.add_argument("--pairs", type=int, default=1, help="runs without and with Prometheus, alternating")
    parser.add_argument("--from-raw", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "prometheus_cost.md")
    args = parser.parse_args()
    command = ".venv/bin/python " + " ".join(sys.argv)
    if args.from_raw:
        runs, command = read_raw()
    else:
        runs = []
        with tempfile.TemporaryDirectory(prefix="prometheus-cost-") as tmp:
            for index in range(2 * args.pairs):
                runs.append(run_once(Path(tmp), args.plan, second_first(index), index + 1))
        keep(runs, command)
    interval = PrometheusSettings().scrape_interval_s
    lines = results_head(
        "What the run's Prometheus costs the machine",
        f"plan {args.plan} with `prometheus: {{enabled: true}}` (scraping every component every {interval:g} s, "
        "the default) and without; CPU in % of one core over each step's measured window (psutil), RSS the "
        "largest sample", command,
        ["run", "prometheus", "nodes", "Prometheus CPU", "Prometheus RSS", "kube-apiserver CPU", "machine CPU"])
    lines += rows(runs)
    lines += ["", "Per step (medians over the runs of each side):", "", *summary(runs), "",
              f"The machine's CPU is of {100 * (runs[0].results.environment.get('machine', {}).get('cpus') or 2)} % "
              "(100 % per core) and covers every process of the machine: other work may have run beside a window. "
              "Prometheus's own row is exact (the kernel's counters of its process); the machine's difference "
              "with and without it also holds what serving its scrapes costs the components, and the machine's "
              "drift between runs.",
              f"Raw runs (results.json, exit code): benchmarks/results/raw/{RAW}/."]
    write_results(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
