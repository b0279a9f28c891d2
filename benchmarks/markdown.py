"""The recorded-results file every benchmark writes: a title, the machine and versions, the exact command,
then a table; one shape, so results files can be read side by side."""

from __future__ import annotations

import gzip
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import psutil


def results_head(title: str, setting: str, command: str, columns: list[str]) -> list[str]:
    return [
        f"# {title} ({time.strftime('%Y-%m-%d')})",
        "",
        f"Machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, {platform.platform()}; "
        f"{setting}",
        f"Command: `{command}`",
        "",
        "| " + " | ".join(columns) + " |",
        "|---" * len(columns) + "|",
    ]


def write_results(path: Path, lines: list[str], also: str = "") -> Path:
    """The results file, its lines as written; says where (and `also`, what else was kept)."""
    path.write_text("\n".join(lines) + "\n")
    print(f"written: {path}{also}")
    return path


RAW_DIR = Path(__file__).resolve().parent / "results" / "raw"  # what each results file was built from


def keep_raw(name: str, data: bytes | Any) -> Path:
    """benchmarks/results/raw/<name>, gzip-compressed: bytes as they are, anything else as JSON (dataclasses and
    paths as their fields and text), so a table can be rechecked from what it was built from."""
    path = RAW_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data if isinstance(data, bytes) else json.dumps(data, default=_plain, indent=1).encode()
    path.write_bytes(gzip.compress(payload))
    return path


def _plain(value: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)
