"""A soak's series on disk as they grow: one JSON line per sample in `soak/samples.jsonl`, fsync'd as it is
written, and `soak/soak.json` (what the soak was asked, the limits its memory and etcd are judged against),
written once before the first sample. A soak killed after three hours keeps three hours: a torn last line (the
kill came mid-write) is skipped on reading, and every earlier line stands."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loadtests.results.spool import Spool

SOAK_DIR = "soak"
SAMPLES_FILE = "samples.jsonl"
META_FILE = "soak.json"


@dataclass
class SoakSample:
    """One sample: seconds since the soak's window opened, the wall time, each series' value (None: not
    measured this time) and where a value is only a histogram bound ("<" or ">")."""

    t_s: float
    at: str
    values: dict[str, float | None]
    bounds: dict[str, str] = field(default_factory=dict)


@dataclass
class SoakMeta:
    """What the soak was asked and the limits it is judged against (None: not known on this machine)."""

    run_id: str
    step: str
    nodes: int
    hours: float
    interval_s: float
    settle_s: float = 0.0  # the first seconds of the window, shown and not judged (config/soak.py)
    memory_limit_bytes: float | None = None  # the machine's memory: an RSS or heap growing toward it
    etcd_quota_bytes: float | None = None  # etcd's --quota-backend-bytes (its 2 GiB default where unset)
    units: dict[str, str] = field(default_factory=dict)  # series -> its unit ("bytes", "count", "s", "%")
    sources: dict[str, str] = field(default_factory=dict)  # series -> where it was read
    notes: list[str] = field(default_factory=list)


def soak_dir(run_dir: Path) -> Path:
    return Path(run_dir) / SOAK_DIR


def write_meta(run_dir: Path, meta: SoakMeta) -> Path:
    """soak.json, whole or not at all (it is rewritten as series first appear)."""
    folder = soak_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{META_FILE}.tmp"
    tmp.write_text(json.dumps(asdict(meta), indent=1))
    os.replace(tmp, folder / META_FILE)
    return folder / META_FILE


def sample_log(run_dir: Path) -> Spool[SoakSample]:
    """The samples file, opened for adding to; each sample a line, flushed and fsync'd before the next."""
    folder = soak_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    return Spool(lambda found: SoakSample(**found), folder / SAMPLES_FILE, durable=True)


def has_soak(run_dir: Path) -> bool:
    return (soak_dir(run_dir) / META_FILE).is_file()


def load_meta(run_dir: Path) -> SoakMeta:
    data: dict[str, Any] = json.loads((soak_dir(run_dir) / META_FILE).read_text())
    return SoakMeta(**data)


def load_samples(run_dir: Path) -> list[SoakSample]:
    """Every whole sample on disk, in order; a line cut short by a kill is left out."""
    path = soak_dir(run_dir) / SAMPLES_FILE
    if not path.is_file():
        return []
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            found.append(SoakSample(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return found
