"""Controlled pods running, as ClusterLoader2's WaitForControlledPodsRunning measures it: for each object that
controls pods (a Deployment, StatefulSet, DaemonSet or Job the load made), how long from the moment it asked for
pods (created, scaled, or its pod template updated) until all of them ran as asked (a Job: until it completed).

One watch per kind, of the run's objects only (its label), from the window's opening: a sample begins at the
first event of a new generation of the object (its creation, or the change of its spec) and ends at the first
event that shows the controller done with that generation; both moments as this process received them. An
object deleted before it got there, a generation replaced by a newer one first (updated or scaled again), or
one still short at the window's close, is counted (the last also named), never timed."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from loadtests.kube.access import ClusterAccess
from loadtests.kube.names import WatchNames
from loadtests.kube.reflector import BackgroundReflector
from loadtests.kube.rest import RestClient
from loadtests.kube.watch import WatchEvent
from loadtests.results.controlled import ControlledPods
from loadtests.results.distribution import Distribution

Json = dict[str, Any]
USER_AGENT = "k8s-loadtest/probe-controlled-pods"
CONTROLLERS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
               "Job": "jobs"}  # the kinds whose pods this measures, and their resources
SOURCE = "watch receive times: a generation asked for -> the controller's status shows it done"
NAMED = 5  # the slowest and the unfinished objects named per kind


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def done(kind: str, obj: Json) -> bool:
    """Whether the controller has done what this generation of the object asks: every pod updated and ready
    (Deployment, StatefulSet, DaemonSet), or the Job complete."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    if kind == "Job":
        wanted = spec.get("completions")
        return _int(status.get("succeeded")) >= (_int(wanted) if wanted is not None else 1)
    if _int(status.get("observedGeneration")) < _int(meta.get("generation")):
        return False
    if kind == "DaemonSet":
        wanted = _int(status.get("desiredNumberScheduled"))
        return (_int(status.get("numberReady")) == wanted and _int(status.get("updatedNumberScheduled")) == wanted
                and _int(status.get("numberAvailable")) == wanted)
    wanted = _int(spec.get("replicas", 1))
    current = _int(status.get("replicas"))
    return (_int(status.get("readyReplicas")) == wanted and _int(status.get("updatedReplicas")) == wanted
            and current == wanted)


class ControlledPodsProbe:
    """Times every generation of the run's pod-controlling objects from asked to done, per kind."""

    def __init__(self, access: ClusterAccess, kinds: Iterable[str], label_selector: str) -> None:
        self.kinds = [k for k in dict.fromkeys(kinds) if k in CONTROLLERS]
        self.client = RestClient(access, pool_size=len(self.kinds) + 1, user_agent=USER_AGENT)
        self._lock = threading.Lock()
        self._began: dict[tuple[str, str, int], float] = {}  # (kind, object, generation) -> asked at
        self._ended: dict[tuple[str, str, int], float] = {}
        self._deleted: set[tuple[str, str, int]] = set()
        self._superseded: set[tuple[str, str, int]] = set()
        self._latest: dict[tuple[str, str], int] = {}  # (kind, object) -> the newest generation seen
        self._watches = [BackgroundReflector(self.client, CONTROLLERS[kind],
                                             WatchNames.of(CONTROLLERS[kind], "", "probe", list_rv="0"),
                                             label_selector=label_selector, page_limit=1, all_pages=False,
                                             on_event=lambda event, kind=kind: self.on_event(kind, event))
                         for kind in self.kinds]

    def on_event(self, kind: str, event: WatchEvent) -> None:
        meta = event.object.get("metadata") or {}
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
        key = (kind, name, _int(meta.get("generation")))
        with self._lock:
            if event.type == "DELETED":
                if key in self._began and key not in self._ended:
                    self._deleted.add(key)
                return
            if event.type in ("ADDED", "MODIFIED"):
                previous = self._latest.get(key[:2])
                if previous is not None and previous < key[2]:
                    older = (kind, name, previous)
                    if older in self._began and older not in self._ended:
                        self._superseded.add(older)
                self._latest[key[:2]] = max(key[2], previous or 0)
                self._began.setdefault(key, event.received_at)
                if key not in self._ended and key not in self._deleted and done(kind, event.object):
                    self._ended[key] = event.received_at

    def start(self) -> None:
        for watch in self._watches:
            watch.start()

    def stop(self) -> None:
        for watch in self._watches:
            watch.stop()
        self.client.close()

    def requests(self) -> Mapping[tuple[str, str], int]:
        return self.client.sent()

    def gather(self) -> dict[str, ControlledPods]:
        """Per kind: the distribution of asked -> done, the slowest objects, those deleted first or unfinished."""
        self.stop()
        found: dict[str, ControlledPods] = {}
        with self._lock:
            for kind in self.kinds:
                keys = [k for k in self._began if k[0] == kind]
                if not keys:  # nothing of this kind asked for pods in the window (a deletion phase)
                    continue
                times = {f"{k[1]} (generation {k[2]})": self._ended[k] - self._began[k] for k in keys
                         if k in self._ended}
                unfinished = sorted(f"{k[1]} (generation {k[2]})" for k in keys if k not in self._ended
                                    and k not in self._deleted and k not in self._superseded)
                slowest = sorted(times.items(), key=lambda item: -item[1])[:NAMED]
                found[kind] = ControlledPods(
                    running=Distribution.of(list(times.values()), SOURCE),
                    slowest={name: round(seconds, 3) for name, seconds in slowest},
                    deleted_first=sum(1 for k in keys if k in self._deleted),
                    superseded=sum(1 for k in keys if k in self._superseded),
                    unfinished=len(unfinished), unfinished_named=unfinished[:NAMED])
        return found
