"""Recorded results for report tests: copies of the fixtures in data/, and variants made from them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "results_sample"  # complete run: 100, 500, 1000 nodes
ABORTED = DATA / "results_aborted"  # aborted during its second step, one step recorded


def copy_run(source: Path, folder: Path) -> Path:
    """A run folder holding only a copy of `source`'s results.json, as on another machine."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "results.json", folder / "results.json")
    return folder


def edited_run(source: Path, folder: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of `source` with its JSON changed by `edit` (in place)."""
    data = json.loads((source / "results.json").read_text())
    edit(data)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(data, indent=1))
    return folder


def scale_latencies(factor: float) -> Callable[[dict[str, Any]], None]:
    """An edit multiplying every latency (server, client, pod startup, watch delay) by `factor`."""

    def edit(data: dict[str, Any]) -> None:
        for step in data["steps"]:
            for entry in step["server"]:
                for q in ("p50", "p90", "p99"):
                    entry[q] = None if entry[q] is None else entry[q] * factor
            for stat in step["client"]:
                for q in ("p50_ms", "p90_ms", "p99_ms", "max_ms", "avg_ms"):
                    stat[q] = None if stat[q] is None else stat[q] * factor
            for name in ("pod_startup", "watch_delay"):
                for q in ("p50", "p90", "p99", "max"):
                    value = step[name][q]
                    step[name][q] = None if value is None else value * factor

    return edit
