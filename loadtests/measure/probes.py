"""All the measurements of one step behind one start()/gather() pair, so the runner needs to know none.

Every measurement is a probe behind one `Probe` protocol, registered by name in PROBES (a new one is a class and
a line there, and its name in config/measure.py, where a plan may turn it off): the scrapes whose answers open
and close the window, the audit reader, the object counts, and the background probes that run between them.
Each probe fails alone: whatever breaks is named in the step's notes and every other figure is still filled.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from loadtests.analysis import etcd
from loadtests.analysis import flow_control as apf
from loadtests.analysis import server as apiserver
from loadtests.analysis.metrics import Snapshot
from loadtests.analysis.scrapes import save_scrapes
from loadtests.controlplane.base import TargetInfo
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.measure import etcd as etcd_asked
from loadtests.measure import heap
from loadtests.measure.audit import AuditReader
from loadtests.measure.cluster_health import DEFAULT_INTERVAL_S, ClusterHealthSampler
from loadtests.measure.cluster_objects import ClusterView
from loadtests.measure.controlled import ControlledPodsProbe
from loadtests.measure.object_counts import count_objects
from loadtests.measure.processes import ProcessSampler, harness_note
from loadtests.measure.profiles import ProfileProbe, ProfileSettings
from loadtests.measure.prometheus import scrape, scrape_apiserver, scrape_instances
from loadtests.measure.watchers import PodStartupProbe, WatchDelayProbe
from loadtests.results import StepResult, utc_at
from loadtests.results.apiserver import ApiserverSection
from loadtests.results.audit import AuditSection
from loadtests.results.controlled import ControlledPods, ControlledSection
from loadtests.results.etcd import EtcdSection, EtcdStats
from loadtests.results.flow_control import FlowControlSection
from loadtests.results.health import ClusterHealth, HealthSection
from loadtests.results.objects import ObjectsSection
from loadtests.results.processes import ProcessesSection

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


@dataclass
class Window:
    """What the probes of one window are built from, and what they share: the scrapes that open and close it
    (the probes that read them fill after every probe has closed) and the notes every probe writes to."""

    info: TargetInfo
    pids: dict[str, list[int]]
    probe_namespace: str
    churn_namespace: str
    process_interval_s: float
    watch_delay_interval_s: float
    health_interval_s: float
    controlled: tuple[str, ...] = ()  # kinds of the objects scenario whose pods are timed (measure/controlled.py)
    objects_selector: str = ""  # the label selector of the run's objects
    profiles: ProfileSettings | None = None  # pprof profiles of the window (measure/profiles.py); None: none
    counted: Mapping[str, str] = field(default_factory=dict)  # more collections to count: name -> path
    apiserver_families: frozenset[str] = frozenset()  # what the apiserver's scrapes keep (every reader's)
    etcd_families: frozenset[str] = frozenset()
    view: ClusterView | None = None  # the nodes and pods, watched (the run's, shared by its windows)
    owns_view: bool = False  # the view is the window's own, made by cluster_view()
    on_open: Callable[[], None] | None = None  # runs as the window opens (the start scrape's answer)
    on_close: Callable[[], None] | None = None  # runs as it closes (the end scrape's answer)
    notes: list[str] = field(default_factory=list)
    opened: float | None = None  # monotonic time the window opened (the start scrape's answer), if scraped
    opened_at: float | None = None  # the window in wall-clock time (epoch seconds), for the audit log
    closed_at: float | None = None
    apiserver: dict[str, Snapshot | None] = field(default_factory=lambda: {"start": None, "end": None})
    etcd: dict[str, Snapshot | None] = field(default_factory=lambda: {"start": None, "end": None})

    def cluster_view(self) -> ClusterView:
        """The nodes and pods, watched: the run's view when it has one, else one of the window's own (the
        window's probes share it; it stops with them)."""
        if self.view is None:
            self.view = ClusterView(self.info.access, (objects.NS_FLEET, self.churn_namespace))
            self.owns_view = True
        return self.view

    def stop_view(self) -> None:
        """Stop the view when it is the window's own (the run stops its own)."""
        if self.owns_view and self.view is not None:
            self.owns_view = False
            self.view.stop()

    def attempt(self, what: str, action: Callable[[], T]) -> T | None:
        """The action's value, or None with a note naming what failed: one broken probe must not cost the others."""
        try:
            return action()
        except Exception as error:
            self.notes.append(f"{what} failed: {_one_line(error)}")
            return None

    def open(self) -> None:
        self.opened_at = time.time()
        if self.on_open is not None:
            self.on_open()

    def close(self) -> None:
        self.closed_at = time.time()
        if self.on_close is not None:
            self.on_close()


class _Processes:
    """CPU and memory of every component over the window: from its start, just after the scrape that opens the
    window, to its close, once the background probes have closed (their last requests and the health sampler's
    last sample in it) and just before the object counts and the scrape that close it. What the harness does
    after the window (reading the audit log, parsing the end scrapes) is in no component's figure, as no other
    figure covers that time."""

    def __init__(self, sampler: ProcessSampler) -> None:
        self.sampler = sampler

    def start(self) -> None:
        self.sampler.start()

    def close(self) -> None:
        self.sampler.close()

    def fill(self, step: StepResult, notes: list[str]) -> None:
        step.put(ProcessesSection(self.sampler.gather(), self.sampler.machine_cpu_percent,
                                  self.sampler.machine_cpu_seconds))
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
        found = self.probe.gather()
        if found is not None:
            setattr(step, self.field_name, found)
        if note := self.probe.shortfall():
            notes.append(note)
        if trouble := self.probe.watch_trouble():
            notes.append(f"{self.label} {trouble}")

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
        step.put(ControlledSection(self.gathered))
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
            step.put(HealthSection(self.gathered))

    def stop(self) -> None:
        self.sampler.stop()

    def requests(self) -> Mapping[tuple[str, str], int]:
        return self.sampler.requests()

    def add(self, component: str, pids: Iterable[int]) -> None:
        self.sampler.add(component, pids)


class _Quiet:
    """The Probe protocol's methods a probe that sends nothing in the background has nothing to do in."""

    def stop(self) -> None:
        pass

    def requests(self) -> Mapping[tuple[str, str], int]:
        return {}

    def add(self, component: str, pids: Iterable[int]) -> None:
        pass


class _ApiserverScrape(_Quiet):
    """The apiserver's /metrics when the window opens and when it closes: the window is the time between the two
    answers, and the server's figures are their differences."""

    def __init__(self, window: Window) -> None:
        self.w = window

    def _scrape(self, on_fetched: Callable[[], None], deferred: bool = False) -> Snapshot:
        w = self.w
        return scrape_apiserver(w.info.access, families=w.apiserver_families, on_fetched=on_fetched,
                                apiservers=w.info.apiservers, notes=w.notes, deferred=deferred)

    def start(self) -> None:
        w = self.w
        # parsed when the window has closed: its parsing is not the harness's CPU inside it
        w.apiserver["start"] = w.attempt("apiserver /metrics scrape at step start",
                                         lambda: self._scrape(w.open, deferred=True))
        if w.opened_at is None:
            w.open()  # the scrape failed: the window still opens, the server figures are missing
        started = w.apiserver["start"]
        w.opened = started.taken_at if started is not None else None

    def close(self) -> None:
        w = self.w
        w.apiserver["end"] = w.attempt("apiserver /metrics scrape at step end", lambda: self._scrape(w.close))
        if w.closed_at is None:
            w.close()  # the scrape failed: the window still closes, the server figures are missing

    def fill(self, step: StepResult, notes: list[str]) -> None:
        start, end, w = self.w.apiserver["start"], self.w.apiserver["end"], self.w
        if end is None:
            return
        step.put(ApiserverSection(
            server=w.attempt("server latency", lambda: apiserver.server_latencies(start, end)) or [],
            requests_by_code=w.attempt("requests by code", lambda: apiserver.requests_by_code(start, end)) or {},
            apiserver=w.attempt("apiserver figures", lambda: apiserver.apiserver_scalars(start, end)) or {},
            storage_objects=w.attempt("storage objects", lambda: apiserver.storage_objects(end)) or {}))
        if start is None:
            notes.append("apiserver figures cover the apiserver's whole life: no start scrape")


class _EtcdScrape(_Quiet):
    """etcd's /metrics around the apiserver's window (every member's, merged, where there are several); without
    them, what the apiserver's page says of its storage."""

    def __init__(self, window: Window) -> None:
        self.w = window

    def _scrape(self, deferred: bool = False) -> Snapshot | None:
        w = self.w
        url, members = w.info.etcd_metrics_url, w.info.etcd_members
        if not url:
            return None
        if len(members) > 1:
            return w.attempt("etcd /metrics scrape", lambda: scrape_instances(
                members, families=w.etcd_families, notes=w.notes, deferred=deferred))
        return w.attempt("etcd /metrics scrape", lambda: scrape(url, families=w.etcd_families, deferred=deferred))

    def start(self) -> None:
        self.w.etcd["start"] = self._scrape(deferred=True)  # parsed after the window, as the apiserver's

    def close(self) -> None:
        self.w.etcd["end"] = self._scrape()

    def fill(self, step: StepResult, notes: list[str]) -> None:
        w, end = self.w, self.w.etcd["end"]
        if end is not None:
            stats = w.attempt("etcd figures", lambda: etcd.etcd_stats(w.etcd["start"], end))
            if stats is not None:
                step.put(EtcdSection(stats))
                self._ask_etcd(stats)
                return
        apiserver_end = w.apiserver["end"]
        if apiserver_end is not None:
            stats = w.attempt("etcd figures from the apiserver", lambda: etcd.etcd_stats_from_apiserver(apiserver_end))
            if stats is not None:
                step.put(EtcdSection(stats))

    def _ask_etcd(self, stats: EtcdStats) -> None:
        """What only etcd itself can say: its alarms, and the keys it holds per prefix."""
        client, w = self.w.info.etcd_client, self.w
        if client is None:
            return
        stats.alarms = w.attempt("etcd alarms", lambda: etcd_asked.alarms(client)) or []
        stats.keys_by_prefix = w.attempt("etcd key counts", lambda: etcd_asked.key_counts(client)) or {}


class _FlowControl(_Quiet):
    """API Priority and Fairness per priority level, from the apiserver's two scrapes of the window."""

    def __init__(self, window: Window) -> None:
        self.w = window

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def fill(self, step: StepResult, notes: list[str]) -> None:
        start, end = self.w.apiserver["start"], self.w.apiserver["end"]
        if end is not None:
            step.put(FlowControlSection(self.w.attempt("flow control", lambda: apf.flow_control(start, end)) or []))


class _ObjectCounts(_Quiet):
    """Objects per resource counted just before the window closes (so the load's stop has not touched them); its
    requests are taken off the server's counts like every probe's."""

    def __init__(self, window: Window) -> None:
        self.w = window
        self.counts: dict[str, int] = {}
        self.sent: Mapping[tuple[str, str], int] = {}

    def start(self) -> None:
        pass

    def close(self) -> None:
        client = RestClient(self.w.info.access, pool_size=1, user_agent=OBJECT_COUNTS_USER_AGENT)
        try:
            self.counts = self.w.attempt("object counts", lambda: count_objects(client, more=self.w.counted)) or {}
            self.sent = dict(client.sent())
        finally:
            client.close()

    def fill(self, step: StepResult, notes: list[str]) -> None:
        step.put(ObjectsSection(self.counts))

    def requests(self) -> Mapping[tuple[str, str], int]:
        return self.sent


class _Audit(_Quiet):
    """Who sent the window's requests, from the apiserver's audit log: its cursor is set before the window opens
    (nothing missed), and it is read for the window's wall-clock times once the window has closed."""

    def __init__(self, window: Window) -> None:
        self.w = window
        self.reader = AuditReader(*window.info.audit_logs)

    def start(self) -> None:
        self.w.attempt("audit log cursor", self.reader.start)

    def close(self) -> None:
        pass

    def fill(self, step: StepResult, notes: list[str]) -> None:
        opened, closed = self.w.opened_at, self.w.closed_at
        if opened is None or closed is None:
            return
        summary = self.w.attempt("audit log", lambda: self.reader.gather(opened, closed))
        if summary is not None:
            step.put(AuditSection(summary))


@dataclass(frozen=True)
class ProbeKind:
    """One probe of the registry: the label that heads its notes ("pod startup probe start failed: ..."), how it
    is made for a window (None: nothing to measure in this one), and the apiserver metric families it reads."""

    label: str
    make: Callable[[Window], Probe | None]
    apiserver_families: frozenset[str] = frozenset()


# Every probe of a window by its name in plans (config/measure.py declares the same names, in this order): they
# start in this order (the etcd scrape before the apiserver's that opens the window, the audit cursor before
# both), close in the reverse order (the background probes first, so their requests lie inside the window the
# apiserver's end scrape closes; the object counts last before it), and fill in this order. The factories look
# their classes up when called, so a test can replace one.
PROBES: dict[str, ProbeKind] = {
    "audit": ProbeKind("audit log", lambda w: _Audit(w) if w.info.audit_logs else None),
    "etcd": ProbeKind("etcd /metrics", lambda w: _EtcdScrape(w)),
    "apiserver": ProbeKind("apiserver /metrics", lambda w: _ApiserverScrape(w), apiserver.FAMILIES),
    "flow_control": ProbeKind("flow control", lambda w: _FlowControl(w), apf.FAMILIES),
    "objects": ProbeKind("object counts", lambda w: _ObjectCounts(w)),
    "processes": ProbeKind("process sampler",
                           lambda w: _Processes(ProcessSampler(w.pids, w.process_interval_s))),
    "pod_startup": ProbeKind("pod startup probe", lambda w: _Watcher(
        PodStartupProbe(w.cluster_view().pods_in(w.churn_namespace)), "pod startup", "pod_startup")),
    "watch_delay": ProbeKind("watch delay probe", lambda w: _Watcher(
        WatchDelayProbe(w.info.access, w.probe_namespace, w.watch_delay_interval_s), "watch delay", "watch_delay")),
    "controlled": ProbeKind("controlled pods probe", lambda w: _Controlled(ControlledPodsProbe(
        w.info.access, w.controlled, w.objects_selector)) if w.controlled else None),
    "health": ProbeKind("cluster health sampler", lambda w: _Health(ClusterHealthSampler(
        w.info, w.pids, interval_s=w.health_interval_s, pod_namespaces=(objects.NS_FLEET, w.churn_namespace),
        origin=w.opened, view=w.cluster_view()))),
    "profiles": ProbeKind("profiler", lambda w: ProfileProbe(w.info, w.profiles, w.opened)
                          if w.profiles is not None else None),
}


def _one_line(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= 300 else text[:297] + "..."


class StepProbes:
    """Start before the load, gather after it: every probe of the registry a plan runs (all of them by default),
    each failing alone.

    The apiserver's scrapes stay available (start_snapshot, end_snapshot) so the runner can ask further
    questions, e.g. count_requests() to check client counts against server counts.
    """

    def __init__(self, target_info: TargetInfo, probe_namespace: str, churn_namespace: str, *,
                 process_interval_s: float = 1.0, watch_delay_interval_s: float = 0.5,
                 health_interval_s: float = DEFAULT_INTERVAL_S, extra_families: Iterable[str] = (),
                 scrapes_dir: Path | None = None, counted: Mapping[str, str] | None = None,
                 controlled: Iterable[str] = (), objects_selector: str = "",
                 profiles: ProfileSettings | None = None, probes: Iterable[str] | None = None,
                 view: ClusterView | None = None) -> None:
        self.target_info = target_info
        self.view = view  # the run's watches of nodes and pods (None: each window makes its own)
        self.counted = dict(counted or {})  # more collections to count at the window's close: name -> path
        self.controlled = tuple(controlled)  # the objects scenario's pod-controlling kinds, timed per window
        self.objects_selector = objects_selector
        self.profiles = profiles  # where and how long the window's pprof profiles are taken (None: not taken)
        # the probes that run, in the registry's order (None: every one)
        self.kinds = {name: kind for name, kind in PROBES.items() if probes is None or name in set(probes)}
        # the scrapes keep only the metric families the probes read (plus any the caller asks for)
        self.apiserver_families = frozenset().union(*(k.apiserver_families for k in self.kinds.values()),
                                                    extra_families)
        self.etcd_families = etcd.FAMILIES | set(extra_families)
        self.probe_namespace = probe_namespace
        self.churn_namespace = churn_namespace
        self.process_interval_s = process_interval_s
        self.watch_delay_interval_s = watch_delay_interval_s
        self.health_interval_s = health_interval_s
        self.scrapes_dir = scrapes_dir  # where the window's raw /metrics pages are kept (None: not kept)
        # requests the probes themselves sent inside the measured window, per (verb, resource)
        self.probe_requests: dict[tuple[str, str], int] = {}
        self.window = self._window()
        self._running: dict[str, Probe] = {}  # the probes of the open window, by name
        self._extra_pids: dict[str, list[int]] = {}
        self._heap_held = False  # this window holds the heap still (measure/heap.py)

    def _window(self, on_open: Callable[[], None] | None = None, on_close: Callable[[], None] | None = None,
                pids: dict[str, list[int]] | None = None) -> Window:
        return Window(self.target_info, pids or {}, self.probe_namespace, self.churn_namespace,
                      self.process_interval_s, self.watch_delay_interval_s, self.health_interval_s,
                      self.controlled, self.objects_selector, self.profiles, self.counted, self.apiserver_families,
                      self.etcd_families, self.view, on_open=on_open, on_close=on_close)

    @property
    def notes(self) -> list[str]:
        return self.window.notes

    @property
    def start_snapshot(self) -> Snapshot | None:
        return self.window.apiserver["start"]

    @property
    def end_snapshot(self) -> Snapshot | None:
        return self.window.apiserver["end"]

    def start(self, on_window_start: Callable[[], None] | None = None,
              on_window_close: Callable[[], None] | None = None) -> None:
        """Start every probe in the registry's order; returns within a few requests' time.

        on_window_start runs right after the apiserver scrape that opens the window, so whatever the caller
        counts from then on (the load generator's statistics) covers the same requests as the server's counts;
        on_window_close (which gather() may also give) right after the scrape that closes it.
        """
        self.stop()
        self.probe_requests = {}
        pids = {component: list(p) for component, p in self.target_info.pids.items()}
        for component, extra in self._extra_pids.items():
            pids.setdefault(component, []).extend(extra)
        self._extra_pids = {}
        self._hold_heap()  # before the scrape that opens the window: its one collection is not the window's
        self.window = window = self._window(on_window_start, on_window_close, pids)
        if "apiserver" not in self.kinds:
            window.open()  # no scrape opens it: it opens now
        for name, kind in self.kinds.items():
            probe = self._start(kind.label, lambda kind=kind: kind.make(window))
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
                self.window.attempt(f"{what} stop", probe.stop)
            return None

    def add_pids(self, component: str, pids: Iterable[int]) -> None:
        """Measure more processes from now on (e.g. the load generator, started after the probes)."""
        pids = list(pids)
        if "processes" in self._running:
            for name, probe in self._running.items():
                self.window.attempt(f"{self.kinds[name].label} add", lambda probe=probe: probe.add(component, pids))
        else:  # not started yet (or it could not start): measured from the next start()
            self._extra_pids.setdefault(component, []).extend(pids)

    def gather(self, step: StepResult, on_window_close: Callable[[], None] | None = None) -> StepResult:
        """Close every probe (in the reverse order: the apiserver's end scrape closes the window once the
        background probes have stopped sending), then fill the step's measured fields (and its notes) in order.

        on_window_close runs right after the apiserver scrape that closes the window (the counterpart of
        start()'s on_window_start), so the load generator's statistics end where the server's counts do."""
        window = self.window
        if on_window_close is not None:
            window.on_close = on_window_close
        for name, probe in reversed(self._running.items()):
            if name == "apiserver":  # every other probe's requests are in: they come off the server's counts
                self.probe_requests = self._probe_request_counts()
            window.attempt(f"{self.kinds[name].label} close", probe.close)
        if window.closed_at is None:
            self.probe_requests = self._probe_request_counts()
            window.close()  # no scrape closed it: it closes now
        self._release_heap()
        if window.opened_at is not None:
            step.window = {"opened_at": utc_at(window.opened_at), "closed_at": utc_at(window.closed_at)}
        if self.scrapes_dir is not None:
            pages = {(source, end): page for source, found in (("apiserver", window.apiserver), ("etcd", window.etcd))
                     for end, page in found.items()}
            scrapes_dir = self.scrapes_dir
            window.attempt("keeping the /metrics pages", lambda: save_scrapes(scrapes_dir, pages))
        for name, probe in self._running.items():
            window.attempt(self.kinds[name].label, lambda probe=probe: probe.fill(step, self.notes))
        # gathered probes are done with; pids added from now on wait for the next start()
        self._running = {}
        window.stop_view()
        step.notes.extend(self.notes)
        return step

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
        """Stop every probe without gathering (an aborted step), without waiting for writes in flight; safe to
        call again."""
        for name, probe in reversed(self._running.items()):
            self.window.attempt(f"{self.kinds[name].label} stop", probe.stop)
        self._running = {}
        self.window.stop_view()
        self._release_heap()

    def _hold_heap(self) -> None:
        """The harness's heap held still through the window (measure/heap.py), once per window."""
        if not self._heap_held:
            heap.hold()
            self._heap_held = True

    def _release_heap(self) -> None:
        if self._heap_held:
            self._heap_held = False
            heap.release()
