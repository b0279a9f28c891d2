"""Recorded runs as the benchmarks keep them (benchmarks/results/raw/: a results.json gzipped, alone or inside a
plan benchmark's record), read back, made run folders again, and edited: what every benchmark and test that
judges recorded runs starts from, so none of them reads a raw file its own way."""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtests.results import RESULTS_FILE

Edit = Callable[[dict[str, Any]], None]


def chosen_raw_run(description: str, default: Path) -> Path:
    """The raw run a benchmark reads, from its command line (`--run FILE`; `default` when not given)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--run", default=str(default),
                        help="a raw run as the plan benchmarks keep it (wall_s, exit_code, results)")
    return Path(parser.parse_args().run)


def read_raw_run(raw: Path) -> dict[str, Any]:
    """A raw run's results.json as a dict (a plan benchmark's record keeps it under `results`)."""
    data = json.loads(gzip.decompress(raw.read_bytes()))
    return data.get("results", data)


def raw_run_folder(raw: Path, folder: Path, edit: Edit | None = None) -> Path:
    """A run folder holding a raw run's results.json, changed by `edit` first when given."""
    data = read_raw_run(raw)
    if edit is not None:
        edit(data)
    folder.mkdir(parents=True)
    (folder / RESULTS_FILE).write_text(json.dumps(data), encoding="utf-8")
    return folder


def scale_latencies(factor: float) -> Edit:
    """An edit multiplying every latency of a run's results (server, client, pod startup and watch delay
    quantiles) by `factor`; CPU, memory and sizes unchanged."""

    def edit(data: dict[str, Any]) -> None:
        for step in data["steps"]:
            for entry in step.get("server") or []:
                for q in ("p50", "p90", "p99"):
                    entry[q] = None if entry.get(q) is None else entry[q] * factor
            for stat in step.get("client") or []:
                for q in ("p50_ms", "p90_ms", "p99_ms", "max_ms", "avg_ms"):
                    stat[q] = None if stat.get(q) is None else stat[q] * factor
            for name in ("pod_startup", "watch_delay"):
                for q in ("p50", "p90", "p99", "max"):
                    value = (step.get(name) or {}).get(q)
                    if value is not None:
                        step[name][q] = value * factor

    return edit
