"""Probes that watch the apiserver the way a controller would, and time what they see with the local clock.

API timestamps have one-second precision, so both probes time events by when this process receives them
(time.monotonic()), which also includes the watch delivery delay a real client would suffer.

- PodStartupProbe: pod creation -> Running and Ready, both as seen by one watch on the namespace: the run's
  watch of the churn's pods (measure/cluster_objects.ClusterView), which the health sampler reads too.
- WatchDelayProbe: a ConfigMap written at a fixed interval; delay = event received - write sent, on a watch of
  its own.

Both watch through the shared LIST+WATCH loop (loadtests.kube.reflector) on the harness's REST clients, whose
request counts let the runner take the probes' own requests off the apiserver's.
"""

from __future__ import annotations

import array
import itertools
import threading
import time
import uuid
from typing import Any

from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.names import WatchNames
from loadtests.kube.objects import MANAGED_BY
from loadtests.kube.paths import resource_path
from loadtests.kube.reflector import BackgroundReflector, Reflector
from loadtests.kube.rest import RestClient
from loadtests.kube.watch import WatchEvent
from loadtests.measure.cluster_objects import Watched, WatchMark
from loadtests.polling import every
from loadtests.results.distribution import Distribution

Json = dict[str, Any]
USER_AGENT = "k8s-loadtest/probe"  # each probe appends its name (k8s-loadtest/probe-pod-startup), for the audit log
WRITE_TIMEOUT_S = 10.0  # a probe write stuck on a silent apiserver gives up within this


def probe_watch(client: RestClient, resource: str, namespace: str, handler: Any,
                field_selector: str = "") -> BackgroundReflector:
    """A watch of the collection from now on: a one-item LIST only for its resourceVersion, then WATCH."""
    names = WatchNames.of(resource, namespace, "probe", list_rv="0")
    return BackgroundReflector(client, resource, names, namespace=namespace, field_selector=field_selector,
                               page_limit=1, all_pages=False, on_event=handler)


def pod_running_ready(pod: Json) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


class _Samples:
    """What both watch probes share: the moments each sample began, and the durations of those that ended, as
    received (a sample that began but never ended is missing).

    A sample that ends is kept as its duration alone (8 bytes) and its key forgotten: the watch-delay probe begins
    two a second, and a window of hours keeping both moments of each grew the harness through every soak. A key
    ends once: a write's sequence number is never reused, and a watch delivers a pod's ADDED once."""

    SOURCE = ""
    MISSING = ""  # what a sample that never ended means, for the step's notes

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._began: dict[Any, float] = {}  # samples under way: key -> when it began
        self._durations = array.array("d")  # the samples that ended, in the order they ended

    def on_event(self, event: WatchEvent) -> None:
        self.handle_event(event.type, event.object, event.received_at)

    def handle_event(self, kind: str, obj: Json, received: float) -> None:
        raise NotImplementedError

    def begin(self, key: Any, at: float) -> None:
        with self._cond:
            self._began.setdefault(key, at)

    def end(self, key: Any, at: float) -> None:
        """The first end of a sample that began (later ones, and ends of unknown samples, change nothing)."""
        with self._cond:
            began = self._began.pop(key, None)
            if began is not None:
                self._durations.append(at - began)
                self._cond.notify_all()

    def samples(self) -> list[float]:
        with self._cond:
            return self._durations.tolist()

    @property
    def missing(self) -> int:
        with self._cond:
            return len(self._began)

    def shortfall(self) -> str | None:
        """A note for the step when some samples never ended."""
        return f"{self.MISSING.format(self.missing)}{self._detail()}" if self.missing else None

    def _detail(self) -> str:
        return ""

    def stop(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        """Stop at once (an aborted step); a probe that only watches has nothing in flight to give up."""
        self.stop()

    def gather(self) -> Distribution | None:
        self.stop()
        return Distribution.of(self.samples(), source=self.SOURCE)


class _WatchProbe(_Samples):
    """A probe with a watch of its own, on its own client (whose counts are the probe's requests); its plain
    requests, a write every half second, over one kept connection (RestClient's `kept`: half the CPU a write)."""

    PART = ""  # its name in its user agent

    def __init__(self, access: ClusterAccess, namespace: str, resource: str, field_selector: str = "",
                 timeout_s: float = 30.0) -> None:
        super().__init__()
        self.access = access
        self.namespace = namespace
        self.client = RestClient(access, pool_size=2, timeout_s=timeout_s, user_agent=f"{USER_AGENT}-{self.PART}",
                                 kept=True)
        self._watch = probe_watch(self.client, resource, namespace, self.on_event, field_selector)

    @property
    def watch(self) -> Reflector:
        return self._watch.reflector

    def requests(self) -> dict[tuple[str, str], int]:
        return self.client.sent()

    def watch_trouble(self) -> str | None:
        """The watch's errors and relists, if it had any."""
        watch = self.watch
        relists = watch.lists - 1
        if watch.errors or relists > 0:
            return f"watch: {watch.errors} errors, {relists} relists (last error: {watch.last_error})"
        return None

    def start(self) -> None:
        self._watch.start()

    def stop(self) -> None:
        self._watch.stop()
        self.client.close()


class PodStartupProbe(_Samples):
    """Creation -> Running+Ready per pod created after start(), both moments as received by one watch: the
    churn namespace's watch of the run's ClusterView, which the health sampler reads too."""

    SOURCE = "watch receive times, create -> Running"
    MISSING = ("pod startup: {} pods created during the step were not seen Running+Ready "
               "(deleted first, or still starting)")

    def __init__(self, pods: Watched[Any]) -> None:
        super().__init__()
        self.pods = pods
        self._mark: WatchMark | None = None

    def handle_event(self, kind: str, obj: Json, received: float) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if not uid:
            return
        if kind == "ADDED":
            self.begin(uid, received)
        if kind != "DELETED" and pod_running_ready(obj):
            self.end(uid, received)

    @property
    def not_running(self) -> int:
        """Pods seen created but never Running+Ready while watched (deleted first, or still pending)."""
        return self.missing

    def requests(self) -> dict[tuple[str, str], int]:
        return {}  # the view's watch is the health sampler's to count

    def watch_trouble(self) -> str | None:
        return self.pods.note(self._mark) if self._mark is not None else None

    def gather(self) -> Distribution | None:
        """None (not measured) when the watch never listed: no pod could have been seen. The pods read before now
        are handed on first (the view's watch hands them on in batches)."""
        self.pods.settle()
        found = super().gather()
        return found if self.pods.synced else None

    def start(self) -> None:
        self._mark = self.pods.mark()
        self.pods.listen(self.on_event)
        self.pods.start()

    def stop(self) -> None:
        self.pods.unlisten(self.on_event)


class WatchDelayProbe(_WatchProbe):
    """Writes a ConfigMap every `interval_s` and times how long each write takes to come back on a watch."""

    SOURCE = "write -> watch event"
    MISSING = "watch delay: {} writes never came back on the watch"
    PART = "watch-delay"
    NAME = "watch-delay-probe"
    ANNOTATION = "k8s-loadtest/watch-delay-seq"

    def __init__(self, access: ClusterAccess, namespace: str, interval_s: float = 0.5, name: str = NAME,
                 grace_s: float = 2.0) -> None:
        super().__init__(access, namespace, "configmaps", f"metadata.name={name}", timeout_s=WRITE_TIMEOUT_S)
        self.interval_s = interval_s
        self.name = name
        self.grace_s = grace_s
        self.token = uuid.uuid4().hex[:8]  # tells this probe's writes from any earlier one's
        self.write_errors = 0
        self.last_error: str | None = None
        self._collection = resource_path("configmaps", namespace)
        self._stopping = threading.Event()
        self._writer: threading.Thread | None = None

    def handle_event(self, kind: str, obj: Json, received: float) -> None:
        value = ((obj.get("metadata") or {}).get("annotations") or {}).get(self.ANNOTATION, "")
        token, _, seq_text = value.partition(":")
        if token == self.token and seq_text.isdigit():
            self.end(int(seq_text), received)

    def mark_sent(self, seq: int, at: float | None = None) -> None:
        """Remember when write `seq` left (now by default)."""
        self.begin(seq, time.monotonic() if at is None else at)

    def _detail(self) -> str:
        return f" ({self.write_errors} failed; last: {self.last_error})" if self.write_errors else ""

    def _ensure_configmap(self) -> None:
        # a short server-side timeout: with etcd gone, start() fails in seconds instead of holding up the step
        if self.client.request("GET", f"{self._collection}/{self.name}", params={"timeout": "10s"}, ok=(404,)):
            return
        manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(MANAGED_BY)},
                    "data": {"purpose": "watch delay probe: write -> watch event"}}
        # 409: created meanwhile by someone else, which is fine
        self.client.request("POST", self._collection, manifest, params={"timeout": "10s"}, ok=(409,))

    def _write(self, seq: int) -> None:
        patch = {"metadata": {"annotations": {self.ANNOTATION: f"{self.token}:{seq}"}}}
        self.mark_sent(seq)  # just before the request leaves
        try:
            self.client.patch(f"{self._collection}/{self.name}", patch)
        except ApiError as error:
            if error.status == 404:
                self._ensure_configmap()
            raise

    def _write_loop(self) -> None:
        sequence = itertools.count(1)

        def write() -> None:
            try:
                self._write(next(sequence))
            except Exception as error:  # count it and keep probing
                self.write_errors += 1
                self.last_error = f"{type(error).__name__}: {error}"

        every(self.interval_s, self._stopping, write)

    def start(self) -> None:
        self._ensure_configmap()
        self._watch.start()
        self._writer = threading.Thread(target=self._write_loop, name="watch-delay-writer", daemon=True)
        self._writer.start()

    def abort(self) -> None:
        """Stop at once (an aborted step): no grace for writes in flight; a write stuck on a hung apiserver
        ends by itself within WRITE_TIMEOUT_S, in its daemon thread."""
        self._stopping.set()
        super().stop()

    def stop(self) -> None:
        """Stop writing, let writes in flight arrive (up to grace_s), close the watch; idempotent."""
        if not self._stopping.is_set():
            self._stopping.set()
            deadline = time.monotonic() + self.grace_s  # for the last write, and for its event
            if self._writer is not None:
                # a write stuck on a silent apiserver ends within WRITE_TIMEOUT_S
                self._writer.join(timeout=self.grace_s + WRITE_TIMEOUT_S)
            with self._cond:
                self._cond.wait_for(lambda: not self._began,
                                    timeout=max(0.0, deadline - time.monotonic()))
        super().stop()

    def delays(self) -> list[float]:
        return self.samples()

    @property
    def lost(self) -> int:
        """Writes sent whose event never arrived (failed writes included)."""
        return self.missing
