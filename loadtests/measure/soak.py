"""A soak's sampler: every `interval_s`, each component's memory, goroutines and file descriptors, etcd's size, the
apiserver's watch caches and objects, its request p99 per class and its 429s and 5xx over the interval, and every
process's RSS and CPU (the harness's and the load generator's among them), and the Python objects the harness
holds, appended to the run folder as it goes (results/soak.py).

It reads what the step's other probes read, through the same helpers: each component's /metrics page
(component_metrics.metrics_sources, kept-alive connections, its own families) and the processes' counters
(processes.CpuMeter). A figure a page does not carry is None in the sample ("not measured"), never 0; a quantile
whose rank falls in a histogram's first or open bucket is kept with its bound."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from loadtests.analysis.metrics import Snapshot, counter_delta_by, histogram_deltas
from loadtests.config.topology import APISERVER, CONTROLLER_MANAGER, ETCD, SCHEDULER
from loadtests.controlplane.base import TargetInfo
from loadtests.kube.rest import short_error
from loadtests.measure.component_metrics import MetricsSource, metrics_sources
from loadtests.measure.processes import HARNESS, CpuMeter
from loadtests.polling import every
from loadtests.results import utc_now
from loadtests.results.soak import SoakMeta, SoakSample, sample_log, write_meta

Values = dict[str, float | None]
# every Go component's page: figure -> metric (a gauge)
PROCESS_GAUGES = {"heap_inuse_bytes": "go_memstats_heap_inuse_bytes", "goroutines": "go_goroutines",
                  "open_fds": "process_open_fds", "process_rss_bytes": "process_resident_memory_bytes"}
ETCD_GAUGES = {"db_size_bytes": "etcd_mvcc_db_total_size_in_bytes",
               "db_in_use_bytes": "etcd_mvcc_db_total_size_in_use_in_bytes", "keys": "etcd_debugging_mvcc_keys_total"}
ETCD_QUOTA = "etcd_server_quota_backend_bytes"
# the apiserver's figures: figure -> metric names, newest first (the first on the page is read)
APISERVER_GAUGES = {"watch_cache_capacity": ("apiserver_watch_cache_capacity",),
                    "objects": ("apiserver_resource_objects", "apiserver_storage_objects")}
REQUEST_LATENCY = "apiserver_request_sli_duration_seconds"  # long-running requests (WATCH) are not in it
REQUESTS = "apiserver_request_total"
VERB_CLASSES = {"read": ("GET", "LIST"), "write": ("POST", "PUT", "PATCH", "DELETE", "APPLY")}
FAMILIES = {
    APISERVER: frozenset({*PROCESS_GAUGES.values(), *(n for names in APISERVER_GAUGES.values() for n in names),
                          REQUEST_LATENCY, REQUESTS}),
    ETCD: frozenset({*PROCESS_GAUGES.values(), *ETCD_GAUGES.values(), ETCD_QUOTA}),
    SCHEDULER: frozenset(PROCESS_GAUGES.values()),
    CONTROLLER_MANAGER: frozenset(PROCESS_GAUGES.values()),
}
UNITS = {"bytes": ("_bytes",), "s": ("_s",), "%": ("cpu_pct",)}
PROGRESS_EVERY_S = 30.0


def unit_of(series: str) -> str:
    """A series' unit from its name's ending: bytes, seconds, % of one core, else a count."""
    return next((unit for unit, ends in UNITS.items() if series.endswith(ends)), "count")


def page_figures(component: str, previous: Snapshot | None, current: Snapshot, bounds: dict[str, str]) -> Values:
    """What one component's page says now (gauges) and over the interval since the previous page (p99 per class,
    429s and 5xx), each figure named `<component>.<figure>`."""
    found: Values = {f"{component}.{figure}": current.total(metric) for figure, metric in PROCESS_GAUGES.items()}
    if component == ETCD:
        found.update({f"{ETCD}.{figure}": current.shared_total(metric) for figure, metric in ETCD_GAUGES.items()})
    if component != APISERVER:
        return found
    for figure, names in APISERVER_GAUGES.items():
        metric = next((name for name in names if current.has(name)), names[0])
        found[f"{APISERVER}.{figure}"] = current.shared_total(metric)
    if previous is None:
        return found
    by_verb = histogram_deltas(previous, current, REQUEST_LATENCY, ("verb",))
    for group, verbs in VERB_CLASSES.items():
        merged = [h for labels, h in by_verb.items() if dict(labels).get("verb") in verbs]
        total = merged[0] if merged else None
        for other in merged[1:]:
            total = total.plus(other) if total else other
        quantile = total.p99() if total is not None else None
        key = f"{APISERVER}.p99_{group}_s"
        found[key] = quantile.honest if quantile is not None else None
        if quantile is not None and quantile.bound:
            bounds[key] = quantile.bound
    if current.has(REQUESTS):
        codes = counter_delta_by(previous, current, REQUESTS, "code")
        found[f"{APISERVER}.requests_429"] = codes.get("429", 0.0)
        found[f"{APISERVER}.requests_5xx"] = sum(n for code, n in codes.items() if code.startswith("5"))
    return found


class SoakSampler:
    """Samples every `interval_s` from start() to stop(), each sample appended and fsync'd as it is taken."""

    def __init__(self, info: TargetInfo, pids: Mapping[str, Iterable[int]], meta: SoakMeta, run_dir: Path,
                 say: Callable[[str], None] = print) -> None:
        self.meta, self.run_dir, self.say = meta, run_dir, say
        self.interval_s = meta.interval_s
        timeout = min(10.0, max(2.0, self.interval_s))
        self.sources, notes = metrics_sources(info, timeout_s=timeout, families=FAMILIES)
        self.meta.notes.extend(notes)
        self.cpu = CpuMeter(pids)
        self.log = sample_log(run_dir)
        self.samples = 0
        self._origin = 0.0
        self._said = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._origin = self._said = time.monotonic()
        write_meta(self.run_dir, self.meta)
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        every(self.interval_s, self._stop, self._sample_said)

    def _sample_said(self) -> None:
        try:
            self.sample()
        except OSError as error:  # the disk: said, and the soak goes on (the run's own save will fail loudly)
            self.say(f"soak: a sample was not written ({short_error(error)})")

    def sample(self) -> SoakSample:
        """Take one sample now and append it."""
        with self._lock:
            values: Values = {}
            bounds: dict[str, str] = {}
            for source in self.sources:
                values.update(self._source_values(source, bounds))
            cpu = self.cpu.read()
            for component, rss in self.cpu.rss().items():  # the kernel's RSS stands for the page's own
                values.pop(f"{component}.process_rss_bytes", None)
                values[f"{component}.rss_bytes"] = float(rss)
                values[f"{component}.cpu_pct"] = cpu.get(f"cpu.{component}")
            values["machine.cpu_pct"] = cpu.get("cpu.machine")
            # Python's objects alive in the harness (its small-object allocator's blocks): a leak of them grows it
            values[f"{HARNESS}.python_blocks"] = float(sys.getallocatedblocks())
            sample = SoakSample(round(time.monotonic() - self._origin, 3), utc_now(), values, bounds)
            self._note_units(values)
            self.log.append(sample)
            self.samples += 1
            self._progress(sample)
            return sample

    def _source_values(self, source: MetricsSource, bounds: dict[str, str]) -> Values:
        current = source.scrape()
        if current is None:
            return {}
        if source.name == ETCD and self.meta.etcd_quota_bytes is None:
            self.meta.etcd_quota_bytes = current.shared_total(ETCD_QUOTA)  # etcd says its quota: no flag to parse
        return page_figures(source.name, source.previous, current, bounds)

    def _note_units(self, values: Values) -> None:
        """A series seen for the first time is named in soak.json with its unit (rewritten then, not every sample)."""
        new = [name for name in values if name not in self.meta.units]
        if new:
            self.meta.units.update({name: unit_of(name) for name in new})
            write_meta(self.run_dir, self.meta)

    def _progress(self, sample: SoakSample) -> None:
        now = time.monotonic()
        if self.samples > 1 and now - self._said < PROGRESS_EVERY_S:
            return
        self._said = now
        left = max(0.0, self.meta.hours * 3600 - sample.t_s)
        rss = sample.values.get(f"{APISERVER}.rss_bytes") or sample.values.get(f"{APISERVER}.process_rss_bytes")
        db = sample.values.get(f"{ETCD}.db_size_bytes")
        figures = "".join([f"; apiserver RSS {rss / 2**20:,.0f} MiB" if rss else "",
                           f"; etcd db {db / 2**20:,.1f} MiB" if db else ""])
        self.say(f"soak: sample {self.samples}, {sample.t_s / 60:.1f} min of {self.meta.hours * 60:.1f} min, "
                 f"{left / 60:.1f} min left{figures}")

    def stop(self) -> None:
        """Stop sampling (safe to call again); what was sampled is on disk already."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            self._thread = None
        with self._lock:  # a sample under way is written whole first
            for source in self.sources:
                source.close()
            self.log.close()

    def add(self, component: str, pids: Iterable[int]) -> None:
        self.cpu.add(component, pids)
