"""The recorded-results file every benchmark writes: a title, the machine and versions, the exact command,
then a table; one shape, so results files can be read side by side."""

from __future__ import annotations

import os
import platform
import time

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
