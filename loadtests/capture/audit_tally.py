"""An audit log's events summed into traffic as they stream past, in memory that grows with the kinds of
request, the identities and the watches open at once, never with the events.

Which stage counts what (every event carries requestReceivedTimestamp and stageTimestamp):
- a request that is no watch counts once, at its ResponseComplete (or Panic, which has none); its latency is
  that event's stageTimestamp less requestReceivedTimestamp; RequestReceived events only widen the window;
- a watch counts as a request once, at its ResponseStarted (its open: what a replay must do at that rate); its
  ResponseComplete (or Panic) is its end, its life from requestReceivedTimestamp to that stageTimestamp (no
  latency); a watch refused before it streamed has a ResponseComplete only (a 4xx or 5xx), counted as its request;
- a watch that ends in the log but opened before its first event was open at the window's start; one whose
  open is missing though it started inside the window (a policy that omits ResponseStarted) is counted as a
  request at its end, and as open since the window's start in the maximum (so the maximum may be above the truth).
Watches open at once are counted in the log's order (the order the apiserver wrote the stages).

A start-up left out (`counted_from`, traffic.start_up): the window begins there. Nothing before it is a request,
a minute, a latency or an identity; a watch that opened before it and was still open then was open at the
window's start, as one opened before the log began is. A window cut short (`counted_until`) ends there: nothing
after it counts, and a watch that ended after it was open at the window's end.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from loadtests.capture import clients
from loadtests.capture.audit_events import AuditEvent
from loadtests.capture.request_shapes import ShapeTally
from loadtests.capture.sketch import Sketch
from loadtests.capture.traffic_types import (
    AGGREGATED_GROUPS,
    STREAMS,
    Identities,
    Latency,
    Minute,
    RequestRate,
    RequestShape,
    StartUp,
    TrafficProfile,
    WatchLoad,
    Window,
    not_replayable,
)
from loadtests.measure.audit import scope_of

ENDS = frozenset({"ResponseComplete", "Panic"})
STARTED = "ResponseStarted"
SHAPED_VERBS = frozenset({"list", "watch"})
BUSIEST_KEPT = 10
HASHED_CLASSES = frozenset({clients.SERVICE_ACCOUNT, clients.USER})  # a node or a component is interchangeable
SOURCE = "apiserver audit log (audit.k8s.io/v1 events)"
COUNTED = ("a request counts at its ResponseComplete (or Panic), a watch at its ResponseStarted (its open; a "
           "watch refused before it streamed at its ResponseComplete); latencies from ResponseComplete; watches "
           "open at once from each watch's ResponseStarted and ResponseComplete")
UNSEEN_WATCHES = ("a watch that neither opened nor ended inside the window left no event and is not counted: a "
                  "window longer than the watches' lives (the apiserver's --min-request-timeout, 1,800 s by "
                  "default, to twice that) sees them all")

# verb, group, resource, subresource, scope, client class, product, code, path (of a request to no resource)
_RateKey = tuple[str, str, str, str, str, str, str, int | None, str | None]
_WatchKey = tuple[str, str, str, str]  # group, resource, client class, product
_LatencyKey = tuple[str, str, str, str, str]  # verb, group, resource, subresource, scope


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _succeeded(code: int | None) -> bool:
    return code is None or 200 <= code < 300


@dataclass
class _Watches:
    """The watches of one resource, client class and product. `running` is those open whose open the log
    showed, less those open before the window that have ended: `before` + `late` + its peak is the most open at
    once (late: opens missing from the log though they started inside the window)."""

    opened: int = 0
    before: int = 0
    late: int = 0
    running: int = 0
    peak: int = 0
    seconds: float = 0.0  # watch-seconds inside the window, of the watches that ended
    lifetimes: Sketch = field(default_factory=Sketch)

    def open(self) -> None:
        self.opened += 1
        self.running += 1
        self.peak = max(self.peak, self.running)

    def end(self, opened_at: float, ended_at: float, received: float) -> None:
        self.running -= 1
        self.seconds += max(0.0, ended_at - opened_at)
        self.lifetimes.add(max(0.0, ended_at - received))


class AuditTally:
    """Events in, one at a time (add); the traffic they make out (profile)."""

    def __init__(self, salt: bytes, counted_from: float = -math.inf, counted_until: float = math.inf) -> None:
        self.salt = salt
        self.counted_from, self.counted_until = counted_from, counted_until
        self.events = 0
        self.left_out = 0  # requests that ended before counted_from (the start-up's)
        self.left_after = 0  # requests that ended after counted_until
        self.first, self.last = math.inf, -math.inf
        self.rates: Counter[_RateKey] = Counter()
        self.minutes: defaultdict[int, Counter[str]] = defaultdict(Counter)
        self.shapes: defaultdict[tuple[str, str, str, str], ShapeTally] = defaultdict(ShapeTally)
        self.watches: defaultdict[_WatchKey, _Watches] = defaultdict(_Watches)
        self.open: dict[str, tuple[_WatchKey, float]] = {}  # audit ID -> the watch's key, when it was received
        self.latencies: defaultdict[_LatencyKey, Sketch] = defaultdict(Sketch)
        # (class, product) -> hashed user -> requests
        self.users: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)

    @property
    def start(self) -> float:
        """The window's start: the log's first event, or the end of a start-up left out."""
        return max(self.first, self.counted_from)

    def add(self, event: AuditEvent) -> None:
        if event.at > self.counted_until:
            self.left_after += int(event.stage in ENDS if event.verb != "watch" else event.stage == STARTED)
            return
        self.events += 1
        self.first, self.last = min(self.first, event.at), max(self.last, event.at)
        who = (clients.client_class(event.username, event.groups), clients.product(event.user_agent))
        if event.at < self.counted_from:
            self._early(event, who)
        elif event.verb == "watch":
            self._watch(event, who)
        elif event.stage in ENDS:
            self._count(event, who)
            if event.subresource not in STREAMS:  # an exec's or a log's stream lasts as long as it is used
                key = (event.verb, event.group, event.resource, event.subresource, _scope(event))
                self.latencies[key].add(max(0.0, event.at - event.received))

    def _count(self, event: AuditEvent, who: tuple[str, str]) -> None:
        """One request: its rate, its minute, its user and (a LIST or WATCH) its shape."""
        key = (event.verb, event.group, event.resource, event.subresource, _scope(event), *who, event.code,
               None if event.resource else clients.path_of(event.uri))
        self.rates[key] += 1
        self.minutes[int(event.at // 60)][event.verb] += 1
        self.users[who][clients.hashed(self.salt, event.username)] += 1
        if event.verb in SHAPED_VERBS and event.resource:
            shape = (event.verb, who[0], event.group, event.resource)
            self.shapes[shape].add(event.uri)

    def _early(self, event: AuditEvent, who: tuple[str, str]) -> None:
        """An event of the start-up left out: a request not counted; a watch opened then is open at the window's
        start until its end says otherwise."""
        if event.verb != "watch":
            self.left_out += int(event.stage in ENDS)
            return
        key = (event.group, event.resource, *who)
        if event.stage == STARTED and event.audit_id not in self.open:
            self.left_out += 1
            self.open[event.audit_id] = (key, event.received)
            self.watches[key].before += 1
        elif event.stage in ENDS and (opened := self.open.pop(event.audit_id, None)) is not None:
            self.watches[opened[0]].before -= 1  # ended inside the start-up: not open at the window's start
        elif event.stage in ENDS and not _succeeded(event.code):
            self.left_out += 1

    def _watch(self, event: AuditEvent, who: tuple[str, str]) -> None:
        key = (event.group, event.resource, *who)
        if event.stage == STARTED:
            if event.audit_id not in self.open:  # a stage written twice counts once
                self.open[event.audit_id] = (key, event.received)
                self.watches[key].open()
                self._count(event, who)
            return
        if event.stage not in ENDS:
            return
        opened = self.open.pop(event.audit_id, None)
        inside = event.received >= self.start
        if opened is None and not _succeeded(event.code):  # refused before it streamed: never open
            if inside:
                self._count(event, who)
            return
        watches = self.watches[opened[0] if opened else key]
        if opened is None:
            if inside:
                watches.late += 1
                watches.opened += 1
                self._count(event, who)
            else:
                watches.before += 1
        watches.end(max(event.received, self.start), event.at, event.received)

    def profile(self, notes: list[str], aggregated: frozenset[str] = AGGREGATED_GROUPS,
                start_up: str = "") -> TrafficProfile:
        """The traffic of the window; `start_up` says why a start-up was left out (counted_from), or why none was."""
        seconds = max(0.0, self.last - self.start)
        rates = self._rates(seconds)
        late = sum(w.late for w in self.watches.values())
        more = [f"{late} watches ended in the log without their ResponseStarted though they began inside the "
                "window (does the audit policy omit the stage?): counted as opened at their end, and as open "
                "since the window's start in max_open"] if late else []
        if seconds == 0:
            more.append("the log spans no time (one instant): no rate is measured")
        return TrafficProfile(
            source=SOURCE, window=Window(iso(self.start), iso(self.last), seconds), requests=sum(self.rates.values()),
            rates=rates, watches=self._watch_loads(seconds), not_replayable=not_replayable(rates, aggregated),
            client_classes=sorted({key[5] for key in self.rates}), shapes=self._shapes(),
            per_minute=self._minutes(), latencies=self._latencies(), identities=self._identities(),
            aggregated_groups=aggregated, notes=[COUNTED, UNSEEN_WATCHES, *notes, *more],
            start_up=self._start_up(start_up))

    def _start_up(self, why: str) -> StartUp | None:
        if not why:
            return None
        if self.counted_from <= self.first:
            return StartUp(None, None, 0.0, 0, why)
        return StartUp(iso(self.first), iso(self.start), self.start - self.first, self.left_out, why,
                       None if math.isinf(self.counted_until) else self.left_after)

    def _rates(self, seconds: float) -> list[RequestRate]:
        rows = [RequestRate(verb=k[0], group=k[1], resource=k[2], subresource=k[3], scope=k[4], client_class=k[5],
                            product=k[6], code=k[7], path=k[8], count=n, per_second=n / seconds if seconds else None)
                for k, n in self.rates.items()]
        return sorted(rows, key=lambda r: (-r.count, r.verb, r.group, r.resource, r.subresource, r.client_class or "",
                                           r.product or "", r.code or 0))

    def _watch_loads(self, seconds: float) -> list[WatchLoad]:
        still: Counter[_WatchKey] = Counter()
        held: dict[_WatchKey, float] = {}  # watch-seconds of those still open, to the window's end
        for key, received in self.open.values():
            still[key] += 1
            held[key] = held.get(key, 0.0) + max(0.0, self.last - max(received, self.start))
        rows = [WatchLoad(group=k[0], resource=k[1], client_class=k[2], product=k[3],
                          max_open=w.before + w.late + max(0, w.peak), open_at_start=w.before,
                          mean_open=(w.seconds + held.get(k, 0.0)) / seconds if seconds else None,
                          open_at_end=still[k], opened=w.opened, lifetime_s=w.lifetimes.quantiles())
                for k, w in self.watches.items()]
        return sorted(rows, key=lambda r: (-(r.max_open or 0), r.group, r.resource, r.client_class or "",
                                           r.product or ""))

    def _shapes(self) -> list[RequestShape]:
        return [tally.shape(*key) for key, tally in sorted(self.shapes.items())]

    def _minutes(self) -> list[Minute]:
        base = min(self.minutes, default=0)
        return [Minute(minute - base, iso(minute * 60), sum(verbs.values()), dict(sorted(verbs.items())))
                for minute, verbs in sorted(self.minutes.items())]

    def _latencies(self) -> list[Latency]:
        return [Latency(*key, seconds=quantiles) for key, sketch in sorted(self.latencies.items())
                if (quantiles := sketch.quantiles()) is not None]

    def _identities(self) -> list[Identities]:
        rows = []
        for (kind, product), users in sorted(self.users.items()):
            busiest = dict(users.most_common(BUSIEST_KEPT)) if kind in HASHED_CLASSES else None
            rows.append(Identities(kind, product, len(users), sum(users.values()), busiest))
        return rows


def _scope(event: AuditEvent) -> str:
    """The request metrics' scope (measure.audit.scope_of); none for a request to no resource."""
    return scope_of(event.verb, event.namespace, event.name) if event.resource else ""
