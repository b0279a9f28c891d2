"""The raw /metrics pages that open and close a step's window, kept with the results (gzip), so every
server-side figure of the step can be recomputed from them, on any machine: `loadtest report --recompute`.

Kept: the apiserver's and etcd's pages at the window's start and end (the sources of server latency,
requests by code, apiserver gauges and counters, objects in storage and etcd figures). Not recomputable from
them: `server_requests` (the probes' own requests are taken off at run time), the cluster-health time
series (sampled through the window, not at its ends), and etcd's alarms and keys per prefix (asked of etcd
itself at the window's close): those stay as recorded.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import Collection
from pathlib import Path

from loadtests.analysis import etcd
from loadtests.analysis import server as apiserver
from loadtests.analysis.metrics import Snapshot
from loadtests.errors import text_of, unreadable
from loadtests.results import StepResult

SCRAPES_DIR = "metrics"
SOURCES = ("apiserver", "etcd")
ENDS = ("start", "end")


def step_folder(run_folder: Path, index: int) -> Path:
    """Where a step's files live in the run folder (Locust's CSVs too)."""
    return run_folder / f"step-{index + 1}"


def scrape_path(folder: Path, source: str, end: str) -> Path:
    return folder / SCRAPES_DIR / f"{source}-{end}.prom.gz"


def save_scrapes(folder: Path, pages: dict[tuple[str, str], Snapshot | None]) -> None:
    """Write each (source, end) page that was scraped; a missing scrape leaves no file."""
    (folder / SCRAPES_DIR).mkdir(parents=True, exist_ok=True)
    for (source, end), snapshot in pages.items():
        if snapshot is not None and snapshot.text:
            scrape_path(folder, source, end).write_bytes(gzip.compress(snapshot.text.encode(), compresslevel=6))


def load_scrape(folder: Path, source: str, end: str, *, families: Collection[str] | None = None) -> Snapshot | None:
    """A kept page: the named families (a lesson reads metrics no step figure does), by default those the step's
    figures read. Never the whole page: a kube-apiserver's is mostly families nobody reads, and parsing all of
    it takes most of a second."""
    path = scrape_path(folder, source, end)
    if not path.exists():
        return None
    if families is None:
        families = apiserver.FAMILIES if source == "apiserver" else etcd.FAMILIES
    fix = "move it away to keep the step's figures as recorded"
    try:
        page = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error) as error:  # BadGzipFile is an OSError; a cut file EOFError
        raise unreadable(path, "kept /metrics page", error, fix) from None
    text = text_of(page, path, "kept /metrics page", fix)
    try:
        return Snapshot.parse(text, families=families)
    except ValueError as error:
        raise unreadable(path, "kept /metrics page", error, fix) from None


def recompute(step: StepResult, folder: Path) -> list[str]:
    """Recompute the step's server-side figures from its kept pages, in place; the figures that could not be
    (their page was not kept), named."""
    missing = []
    start, end = load_scrape(folder, "apiserver", "start"), load_scrape(folder, "apiserver", "end")
    if end is None:
        missing.append(f"step {step.index + 1}: no apiserver end page kept: server figures left as recorded")
    else:
        step.server = apiserver.server_latencies(start, end)
        step.requests_by_code = apiserver.requests_by_code(start, end)
        step.apiserver = apiserver.apiserver_scalars(start, end)
        step.storage_objects = apiserver.storage_objects(end)
    etcd_start, etcd_end = load_scrape(folder, "etcd", "start"), load_scrape(folder, "etcd", "end")
    if etcd_end is not None:
        asked = step.etcd  # its alarms and key counts were asked of etcd itself, not read from a page
        step.etcd = etcd.etcd_stats(etcd_start, etcd_end)
        step.etcd.alarms, step.etcd.keys_by_prefix = asked.alarms, asked.keys_by_prefix
    elif end is not None and step.etcd.source == etcd.SOURCE_APISERVER:
        step.etcd = etcd.etcd_stats_from_apiserver(end)
    else:
        missing.append(f"step {step.index + 1}: no etcd end page kept: etcd figures left as recorded")
    return missing


@functools.lru_cache(maxsize=64)
def _parsed_page(folder: Path, source: str, which: str, families: frozenset[str], _stamp: int) -> Snapshot | None:
    return load_scrape(folder, source, which, families=families)


def kept_page(folder: Path, source: str, which: str, families: frozenset[str]) -> Snapshot | None:
    """The named families of a step's kept page, parsed once while it is unchanged: a lesson's measures read the
    same few pages of several megabytes, each page from every variant's evaluation and the table's."""
    try:
        stamp = scrape_path(folder, source, which).stat().st_mtime_ns
    except OSError:
        return None
    return _parsed_page(folder, source, which, families, stamp)
