"""All the measurements of one step behind one start()/gather() pair, so the runner needs to know none.

The window opens and closes with the apiserver's (and etcd's) /metrics scrapes; between them run the background
probes, each behind one `Probe` protocol and registered by name in PROBES (a new one is a class and a line
there). Each probe fails alone: whatever breaks is named in the step's notes and every other figure is still
filled.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from loadtests.analysis import etcd
from loadtests.analysis import server as apiserver
from loadtests.analysis.metrics import Snapshot
from loadtests.analysis.scrapes import save_scrapes
from loadtests.controlplane.base import TargetInfo
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.measure import etcd as etcd_asked
from loadtests.measure.audit import AuditReader
from loadtests.measure.cluster_health import DEFAULT_INTERVAL_S, ClusterHealthSampler
from loadtests.measure.controlled import ControlledPodsProbe
from loadtests.measure.object_counts import count_objects
from loadtests.measure.processes import ProcessSampler, harness_note
from loadtests.measure.profiles import ProfileProbe, ProfileSettings
from loadtests.measure.prometheus import scrape, scrape_apiserver, scrape_instances
from loadtests.measure.watchers import PodStartupProbe, WatchDelayProbe
from loadtests.results import StepResult, utc_at
from loadtests.results.controlled import ControlledPods
from loadtests.results.etcd import EtcdStats
from loadtests.results.health import ClusterHealth

T = TypeVar("T")
OBJECT_COUNTS_USER_AGENT = "k8s-loadtest/probe-object-counts"


class Probe(Protocol):
    """One background measurement of a step's window, as StepProbes drives every one of them: started when the
    window opens, closed before the end scrape (its own requests then lie inside the window), filled into the
    step after it, stopped on an abort. requests() are those it sent, taken off the server's counts."""

    def start(self) -> None: ...

    def close(self) -> None: ...

    def fill(self, step: StepResult, notes: list[str]) -> None: ...

    def stop(self) -> None: ...

    def requests(self) -> Mapping[tuple[str, str], int]: ...

    def add(self, component: str, pids: Iterable[int]) -> None: ...


@dataclass(frozen=True)
class Window:
    """What the probes of one window are built from."""

    info: TargetInfo
    pids: dict[str, list[int]]
    probe_namespace: str
    churn_namespace: str
    process_interval_s: float
    watch_delay_interval_s: float
    health_interval_s: float
    opened: float | None  # monotonic time the window opened (the start scrape's answer), if it was scraped
    controlled: tuple[str, ...] = ()  # kinds of the objects scenario whose pods are timed (measure/controlled.py)
    objects_selector: str = ""  # the label selector of the run's objects
    profiles: ProfileSettings | None = None  # pprof profiles of the window (measure/profiles.py); None: none


class _Processes:
    """CPU and memory of every component, gathered last, after the end scrape: the whole window."""

    def __init__(self, sampler: ProcessSampler) -> None:
        self.sampler = sampler

    def start(self) -> None:
        self.sampler.start()

    def close(self) -> None:
        pass  # it sends no request: it samples until fill()

    def fill(self, step: StepResult, notes: list[str]) -> None:
        step.processes = self.sampler.gather()
        step.machine_cpu_percent = self.sampler.machine_cpu_percent
        step.machine_cpu_seconds = self.sampler.machine_cpu_seconds
        for component, missing in self.sampler.missing.items():
            notes.append(f"process sampling: {component} pids {missing} did not exist")
        if note := harness_note(step.processes):
            notes.append(note)

    def stop(self) -> None:
        self.sampler.stop()

    def requests(self) -> Mapping[tuple[str, str], int]:
        return {}

    def add(self, component: str, pids: Iterable[int]) -> None:
        self.sampler.add(component, pids)


class _Watcher:
    """A probe that watches what it writes (pod startup, watch delay): its distribution goes to step.<field>."""

    def __init__(self, probe: PodStartupProbe | WatchDelayProbe, label: str, field_name: str) -> None:
        self.probe, self.label, self.field_name = probe, label, field_name

    def start(self) -> None:
        self.probe.start()

    def close(self) -> None:
        self.probe.stop()

    def fill(self, step: StepResult, notes: list[str]) -> None:
        setattr(step, self.field_name, self.probe.gather())
        if note := self.probe.shortfall():
            notes.append(note)
        watch = self.probe.watch
        relists = watch.lists - 1
        if watch.errors or relists > 0:
            notes.append(f"{self.label} watch: {watch.errors} errors, {relists} relists "
                         f"(last error: {watch.last_error})")

    def stop(self) -> None:
        self.probe.abort()  # writes in flight are not waited for

    def requests(self) -> Mapping[tuple[str, str], int]:
        return self.probe.requests()

    def add(self, component: str, pids: Iterable[int]) -> None:
        pass


class _Controlled:
    """Controlled pods running per kind of the objects scenario: closed with the others, into step.controlled."""

    def __init__(self, probe: ControlledPodsProbe) -> None:
        self.probe = probe
        self.gathered: dict[str, ControlledPods] = {}

    def start(self) -> None:
        self.probe.start()

    def close(self) -> None:
        self.gathered = self.probe.gather()

    def fill(self, step: StepResult, notes: list[str]) -> None:
        step.controlled = self.gathered
        for kind, found in self.gathered.items():
            if found.unfinished:
                notes.append(f"controlled pods: {found.unfinished} {kind} generation(s) not done at the window's "
                             f"close: {', '.join(found.unfinished_named)}")

    def stop(self) -> None:
        self.probe.stop()

    def requests(self) -> Mapping[tuple[str, str], int]:
        return self.probe.requests()

    def add(self, component: str, pids: Iterable[int]) -> None:
        pass


class _Health:
    """Cluster health through the window: its last sample is taken when it closes, before the others stop."""

    def __init__(self, sampler: ClusterHealthSampler) -> None:
        self.sampler = sampler
        self.gathered: ClusterHealth | None = None

    def start(self) -> None:
        self.sampler.start()

    def close(self) -> None:
        self.gathered = self.sampler.gather()
        self.sampler.stop()

    def fill(self, step: StepResult, notes: list[str]) -> None:
        if self.gathered is not None:  # its trouble stays in its own notes
            step.health = self.gathered

    def stop(self) -> None:
        self.sampler.stop()

    def requests(self) -> Mapping[tuple[str, str], int]:
        return self.sampler.requests()

    def add(self, component: str, pids: Iterable[int]) -> None:
        self.sampler.add(component, pids)


# Every background probe of a window, by name, in the order they start (they close in the reverse order,
# the health sampler first, and fill in this order). The names head their notes: "pod startup probe start
# failed: ...". The factories look their classes up when called, so a test can replace one; a factory that
# returns None has nothing to measure in this window.
PROBES: dict[str, Callable[[Window], Probe | None]] = {
    "process sampler": lambda w: _Processes(ProcessSampler(w.pids, w.process_interval_s)),
    "pod startup probe": lambda w: _Watcher(PodStartupProbe(w.info.access, w.churn_namespace),
                                            "pod startup", "pod_startup"),
    "watch delay probe": lambda w: _Watcher(WatchDelayProbe(w.info.access, w.probe_namespace,
                                                            w.watch_delay_interval_s), "watch delay", "watch_delay"),
    "controlled pods probe": lambda w: _Controlled(ControlledPodsProbe(w.info.access, w.controlled,
                                                                       w.objects_selector)) if w.controlled else None,
    "cluster health sampler": lambda w: _Health(ClusterHealthSampler(
        w.info, w.pids, interval_s=w.health_interval_s, pod_namespaces=(objects.NS_FLEET, w.churn_namespace),
        origin=w.opened)),
    "profiler": lambda w: ProfileProbe(w.info, w.profiles, w.opened) if w.profiles is not None else None,
}


def _one_line(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= 300 else text[:297] + "..."


class StepProbes:
    """Start before the load, gather after it: metric scrapes, process sampling, pod startup, watch delay and
    cluster health sampled through the step.

    The scrapes stay available as attributes (start_snapshot, end_snapshot, etcd_start, etcd_end) so the
    runner can ask further questions, e.g. count_requests() to check client counts against server counts.
    """

    def __init__(self, target_info: TargetInfo, probe_namespace: str, churn_namespace: str, *,
                 process_interval_s: float = 1.0, watch_delay_interval_s: float = 0.5,
                 health_interval_s: float = DEFAULT_INTERVAL_S, extra_families: Iterable[str] = (),
                 scrapes_dir: Path | None = None, counted: Mapping[str, str] | None = None,
                 controlled: Iterable[str] = (), objects_selector: str = "",
                 profiles: ProfileSettings | None = None) -> None:
        self.target_info = target_info
        self.counted = dict(counted or {})  # more collections to count at the window's close: name -> path
        self.controlled = tuple(controlled)  # the objects scenario's pod-controlling kinds, timed per window
        self.objects_selector = objects_selector
        self.profiles = profiles  # where and how long the window's pprof profiles are taken (None: not taken)
        # the scrapes keep only the metric families the probes read (plus any the caller asks for)
        self.apiserver_families = apiserver.FAMILIES | set(extra_families)
        self.etcd_families = etcd.FAMILIES | set(extra_families)
        self.probe_namespace = probe_namespace
        self.churn_namespace = churn_namespace
        self.process_interval_s = process_interval_s
        self.watch_delay_interval_s = watch_delay_interval_s
        self.health_interval_s = health_interval_s
        self.scrapes_dir = scrapes_dir  # where the window's raw /metrics pages are kept (None: not kept)
        self.start_snapshot: Snapshot | None = None
        self.end_snapshot: Snapshot | None = None
        self.etcd_start: Snapshot | None = None
        self.etcd_end: Snapshot | None = None
        # requests the probes themselves sent inside the measured window, per (verb, resource)
        self.probe_requests: dict[tuple[str, str], int] = {}
        self.notes: list[str] = []
        self._running: dict[str, Probe] = {}  # the background probes of the open window, by name
        self._extra_pids: dict[str, list[int]] = {}
        self._audit: AuditReader | None = None
        # the measured window in wall-clock time (epoch seconds), to line up the audit log and other monitoring
        self.opened_at: float | None = None
        self.closed_at: float | None = None

    def _attempt(self, what: str, action: Callable[[], T]) -> T | None:
        try:
            return action()
        except Exception as error:  # one broken probe must not cost the others
            self.notes.append(f"{what} failed: {_one_line(error)}")
            return None

    def _scrape_apiserver(self, on_fetched: Callable[[], None] | None = None) -> Snapshot:
        return scrape_apiserver(self.target_info.access, families=self.apiserver_families, on_fetched=on_fetched,
                                apiservers=self.target_info.apiservers, notes=self.notes)

    def _scrape_etcd(self) -> Snapshot | None:
        """The main etcd's page, or with several members every member's, merged (each its own figures)."""
        url, members = self.target_info.etcd_metrics_url, self.target_info.etcd_members
        if not url:
            return None
        if len(members) > 1:
            return self._attempt("etcd /metrics scrape", lambda: scrape_instances(
                members, families=self.etcd_families, notes=self.notes))
        return self._attempt("etcd /metrics scrape", lambda: scrape(url, families=self.etcd_families))

    def start(self, on_window_start: Callable[[], None] | None = None) -> None:
        """Scrape, then start the background probes; returns within a few requests' time.

        on_window_start runs right after the apiserver scrape that opens the window, so whatever the caller
        counts from then on (the load generator's statistics) covers the same requests as the server's counts.
        """
        self.stop()
        self.notes = []
        self.start_snapshot = self.end_snapshot = self.etcd_start = self.etcd_end = None
        self.probe_requests = {}
        self.opened_at = self.closed_at = None
        self._audit = None
        if self.target_info.audit_logs:  # its cursor is set before the window opens: nothing missed
            self._audit = AuditReader(*self.target_info.audit_logs)
            self._attempt("audit log cursor", self._audit.start)

        def window_opens() -> None:
            self.opened_at = time.time()
            if on_window_start is not None:
                on_window_start()

        self.start_snapshot = self._attempt("apiserver /metrics scrape at step start",
                                            lambda: self._scrape_apiserver(window_opens))
        if self.opened_at is None:
            window_opens()  # the scrape failed: the window still opens, the server figures are missing
        self.etcd_start = self._scrape_etcd()

        pids = {component: list(p) for component, p in self.target_info.pids.items()}
        for component, extra in self._extra_pids.items():
            pids.setdefault(component, []).extend(extra)
        self._extra_pids = {}
        # the health time series counts from the moment the window opened (the start scrape's answer)
        window = Window(self.target_info, pids, self.probe_namespace, self.churn_namespace, self.process_interval_s,
                        self.watch_delay_interval_s, self.health_interval_s,
                        self.start_snapshot.taken_at if self.start_snapshot is not None else None,
                        self.controlled, self.objects_selector, self.profiles)
        self._running = {}
        for name, make in PROBES.items():
            probe = self._start(name, lambda make=make: make(window))
            if probe is not None:
                self._running[name] = probe

    def _start(self, what: str, make: Callable[[], Probe | None]) -> Probe | None:
        """The probe, started; None when it has nothing to measure, or (with a note) could not be made or start."""
        probe = None
        try:
            probe = make()
            if probe is None:
                return None
            probe.start()
            return probe
        except Exception as error:
            self.notes.append(f"{what} start failed: {_one_line(error)}")
            if probe is not None:
                self._attempt(f"{what} stop", probe.stop)
            return None

    def add_pids(self, component: str, pids: Iterable[int]) -> None:
        """Measure more processes from now on (e.g. the load generator, started after the probes)."""
        pids = list(pids)
        if "process sampler" in self._running:
            for name, probe in self._running.items():
                self._attempt(f"{name} add", lambda probe=probe: probe.add(component, pids))
        else:  # not started yet (or it could not start): measured from the next start()
            self._extra_pids.setdefault(component, []).extend(pids)

    def _close_probes(self) -> None:
        """Every background probe stops sending requests (the health sampler takes its last sample first)."""
        for name, probe in reversed(self._running.items()):
            self._attempt(f"{name} close", probe.close)

    def gather(self, step: StepResult, on_window_close: Callable[[], None] | None = None) -> StepResult:
        """Fill the measured fields of `step` (and its notes) and return it.

        on_window_close runs right after the apiserver scrape that closes the window (the counterpart of
        start()'s on_window_start), so the load generator's statistics end where the server's counts do."""
        # The background probes close first, so every request they sent lies inside the window the end scrape
        # ends; the health sampler takes its last sample before the others stop.
        self._close_probes()
        # objects counted just before the window closes (so the load's stop has not touched them); the
        # requests are the probes' own, taken off the server's counts like the others
        object_requests = self._fill_objects(step)
        self.probe_requests = dict(collections.Counter(self._probe_request_counts()) + object_requests)

        def window_closes() -> None:
            self.closed_at = time.time()
            if on_window_close is not None:
                on_window_close()

        self.end_snapshot = self._attempt("apiserver /metrics scrape at step end",
                                          lambda: self._scrape_apiserver(window_closes))
        if self.closed_at is None:
            window_closes()  # the scrape failed: the window still closes, the server figures are missing
        self.etcd_end = self._scrape_etcd()
        if self.opened_at is not None:
            step.window = {"opened_at": utc_at(self.opened_at), "closed_at": utc_at(self.closed_at)}
        self._fill_audit(step)
        if self.scrapes_dir is not None:
            pages = {("apiserver", "start"): self.start_snapshot, ("apiserver", "end"): self.end_snapshot,
                     ("etcd", "start"): self.etcd_start, ("etcd", "end"): self.etcd_end}
            scrapes_dir = self.scrapes_dir
            self._attempt("keeping the /metrics pages", lambda: save_scrapes(scrapes_dir, pages))

        start, end = self.start_snapshot, self.end_snapshot
        if end is not None:
            step.server = self._attempt("server latency",
                                        lambda: apiserver.server_latencies(start, end)) or []
            step.requests_by_code = self._attempt("requests by code",
                                                  lambda: apiserver.requests_by_code(start, end)) or {}
            step.apiserver = self._attempt("apiserver figures",
                                           lambda: apiserver.apiserver_scalars(start, end)) or {}
            step.storage_objects = self._attempt("storage objects",
                                                 lambda: apiserver.storage_objects(end)) or {}
            if start is None:
                self.notes.append("apiserver figures cover the apiserver's whole life: no start scrape")
        self._fill_etcd(step)
        for name, probe in self._running.items():
            self._attempt(name, lambda probe=probe: probe.fill(step, self.notes))
        # gathered probes are done with; pids added from now on wait for the next start()
        self._running = {}
        self._audit = None
        step.notes.extend(self.notes)
        return step

    def _fill_audit(self, step: StepResult) -> None:
        reader, opened, closed = self._audit, self.opened_at, self.closed_at
        if reader is None or opened is None or closed is None:
            return
        summary = self._attempt("audit log", lambda: reader.gather(opened, closed))
        if summary is not None:
            step.audit = summary

    def _fill_objects(self, step: StepResult) -> collections.Counter[tuple[str, str]]:
        """Objects per resource at the window's close; the requests that counted them."""
        client = RestClient(self.target_info.access, pool_size=1, user_agent=OBJECT_COUNTS_USER_AGENT)
        try:
            step.objects = self._attempt("object counts", lambda: count_objects(client, more=self.counted)) or {}
            return collections.Counter(client.sent())
        finally:
            client.close()

    def _fill_etcd(self, step: StepResult) -> None:
        end = self.etcd_end
        if end is not None:
            stats = self._attempt("etcd figures", lambda: etcd.etcd_stats(self.etcd_start, end))
            if stats is not None:
                step.etcd = stats
                self._ask_etcd(stats)
                return
        if self.end_snapshot is not None:
            apiserver_end = self.end_snapshot
            stats = self._attempt("etcd figures from the apiserver",
                                  lambda: etcd.etcd_stats_from_apiserver(apiserver_end))
            if stats is not None:
                step.etcd = stats

    def _ask_etcd(self, stats: EtcdStats) -> None:
        """What only etcd itself can say: its alarms, and the keys it holds per prefix."""
        client = self.target_info.etcd_client
        if client is None:
            return
        stats.alarms = self._attempt("etcd alarms", lambda: etcd_asked.alarms(client)) or []
        stats.keys_by_prefix = self._attempt("etcd key counts", lambda: etcd_asked.key_counts(client)) or {}

    def _probe_request_counts(self) -> dict[tuple[str, str], int]:
        total: collections.Counter[tuple[str, str]] = collections.Counter()
        for probe in self._running.values():
            total.update(probe.requests())
        return dict(total)

    def count_requests(self, verb: str, resource: str, subresource: str = "", *,
                       exclude_probes: bool = True) -> int | None:
        """Requests of one verb+resource the apiserver finished in the step; None without an end scrape.

        With exclude_probes, requests the probes sent themselves are taken off (not WATCH: a watch is counted
        by the apiserver only when it ends, so its count cannot be matched).
        """
        if self.end_snapshot is None:
            return None
        count = apiserver.count_requests(self.start_snapshot, self.end_snapshot, verb, resource, subresource)
        if exclude_probes and not subresource and verb.upper() not in apiserver.STREAMING_VERBS:
            count -= self.probe_requests.get((verb.upper(), resource), 0)
        return count

    def stop(self) -> None:
        """Stop every background probe without gathering (an aborted step), without waiting for writes in
        flight; safe to call again."""
        for name, probe in reversed(self._running.items()):
            self._attempt(f"{name} stop", probe.stop)
        self._running = {}
