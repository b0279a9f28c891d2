"""Who sent which request: the apiserver's audit log, read over a step's measured window.

Every audited request is attributed to a client, named from its user agent (the harness's own parts send
`k8s-loadtest/<part>`; kube components send `kube-scheduler/v1.37.2 (...)`), with the controller's service
account beside kube-controller-manager (it uses one per controller). Per step, the requests are summed per
client, verb, resource and scope (count, apiserver seconds, p99, response codes), the slowest are kept one by
one, and the report derives the rest (top clients, who made an SLO verdict's samples).

The log rotates (size-bounded): the reader remembers where the window opened (the file's inode and offset)
and reads on across a rotation. Only events whose request arrived inside the window count.
"""

from __future__ import annotations

import heapq
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from loadtests.kube import jsonbody
from loadtests.results.audit import AuditRequest, AuditRow, AuditSummary
from loadtests.results.distribution import Distribution

# audit verbs -> the verbs the apiserver's request metrics use (and the SLO verdicts with them)
METRIC_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}
SLOWEST_KEPT = 15
_SERVICE_ACCOUNT = "system:serviceaccount:kube-system:"


def client_of(user_agent: str, username: str) -> str:
    """A client's name from its user agent: the product (`kube-scheduler`), or the harness's part
    (`k8s-loadtest/pod_churn`); kube-controller-manager's controllers are told apart by service account."""
    agent = user_agent.strip()
    if not agent:
        return f"(no user agent) {username}".strip()
    name = product_of(agent)
    if name == "k8s-loadtest":
        return agent.split(" ", 1)[0]  # k8s-loadtest/<part>
    if name == "kube-controller-manager" and username.startswith(_SERVICE_ACCOUNT):
        return f"{name} ({username.removeprefix(_SERVICE_ACCOUNT)})"
    return name or agent


def product_of(user_agent: str) -> str:
    """The product a user agent names, its first word up to the first `/` (`kubelet`, `kube-proxy`, an
    operator's name): what client-go puts first, the same for every version and platform of one program."""
    return user_agent.strip().split(" ", 1)[0].partition("/")[0]


def scope_of(verb: str, namespace: str, name: str) -> str:
    """The scope label the apiserver's request metrics give: a create counts as a single object; a LIST or
    WATCH of one name (fieldSelector=metadata.name=...) still as its collection, though the audit names it."""
    if verb == "create" or (name and verb not in ("list", "watch")):
        return "resource"
    return "namespace" if namespace else "cluster"


def event_time(text: str) -> float:
    """An audit event's timestamp (RFC 3339, microseconds, `Z`) in epoch seconds."""
    return datetime.fromisoformat(text).timestamp()


@dataclass
class _Cursor:
    """Where the window opened in the log: the file (by inode, which a rotation keeps, and its first bytes,
    since a new file may reuse a removed one's inode) and the offset."""

    inode: int | None
    offset: int
    head: bytes = b""

    def is_file(self, path: Path, inode: int) -> bool:
        if inode != self.inode:
            return False
        try:
            with path.open("rb") as handle:
                return handle.read(len(self.head)) == self.head
        except FileNotFoundError:
            return False


@dataclass
class _Tally:
    count: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)


class AuditReader:
    """start() where the window opens, gather() when it closes: the step's requests by client, from one
    apiserver's audit log or from each of several apiservers' (every request is in exactly one of them)."""

    def __init__(self, log_path: Path, *more: Path) -> None:
        self.log_path = log_path
        self.logs = (log_path, *more)
        self._cursors = {log: _Cursor(None, 0) for log in self.logs}

    def start(self) -> None:
        for log in self.logs:
            try:
                with log.open("rb") as handle:
                    stat = os.fstat(handle.fileno())
                    self._cursors[log] = _Cursor(stat.st_ino, stat.st_size, handle.read(min(stat.st_size, 256)))
            except FileNotFoundError:  # nothing audited yet: every file the window sees is new
                self._cursors[log] = _Cursor(None, 0)

    def _files(self) -> tuple[list[tuple[Path, int]], bool]:
        """Every log's files to read, each log's oldest first, with the offset to read from; and whether a
        file a window opened in was rotated away (then every file left is read, and the counts are partial)."""
        files, lost = [], False
        for log in self.logs:
            found, rotated = self._log_files(log)
            files += found
            lost = lost or rotated
        return files, lost

    def _log_files(self, log: Path) -> tuple[list[tuple[Path, int]], bool]:
        cursor = self._cursors[log]
        found: list[tuple[bool, str, Path, int]] = []
        for path in log.parent.glob(f"{log.stem}*{log.suffix}"):
            try:
                inode = path.stat().st_ino
            except FileNotFoundError:
                continue
            # rotated files carry their rotation time in their name (audit-2026-11-30T12-00-02.000.log),
            # so names sort them; the live file comes last
            found.append((path == log, path.name, path, inode))
        found.sort(key=lambda item: item[:2])
        start = next((i for i, item in enumerate(found) if cursor.is_file(item[2], item[3])), None)
        if start is None:
            return [(item[2], 0) for item in found], cursor.inode is not None
        return [(found[start][2], cursor.offset)] + [(item[2], 0) for item in found[start + 1:]], False

    def _events(self, files: list[tuple[Path, int]]) -> Iterator[dict]:
        for path, offset in files:
            try:
                with path.open("rb") as handle:
                    handle.seek(offset)
                    for line in handle:
                        if line.endswith(b"\n"):
                            try:
                                yield jsonbody.loads(line)
                            except ValueError:
                                continue
            except FileNotFoundError:  # rotated away while reading
                continue

    def gather(self, opened: float, closed: float) -> AuditSummary:
        """Sum the requests that arrived between `opened` and `closed` (epoch seconds) by client, verb,
        resource and scope; a watch counts once, when it started, and its duration is not a latency."""
        files, lost = self._files()
        summary = self._summary(lost)
        tallies: dict[_Key, _Tally] = {}
        slowest: list[tuple[float, int, AuditRequest]] = []
        for number, event in enumerate(self._events(files)):
            if not _counts(event):
                continue
            try:
                received = event_time(event["requestReceivedTimestamp"])
                finished = event_time(event["stageTimestamp"])
            except (KeyError, ValueError):
                summary.unreadable += 1
                continue
            if not opened <= received <= closed:
                continue
            summary.events += 1
            timed = _tally(tallies, event, received, finished, opened)
            if timed is not None:
                _keep_slowest(slowest, (timed[0], number, timed[1]))
        summary.requests = _rows(tallies)
        summary.slowest = [request for _, _, request in sorted(slowest, key=lambda e: -e[0])]
        return summary

    def _summary(self, lost: bool) -> AuditSummary:
        """An empty summary that says which logs it reads, and whether the window's first requests are lost."""
        logs = (self.log_path.name if len(self.logs) == 1
                else f"{self.log_path.name} of each of {len(self.logs)} apiservers")
        summary = AuditSummary(source=f"apiserver audit log ({logs}, Metadata level)")
        if lost:
            summary.notes.append("the audit log rotated past the window's start, so its first requests are "
                                 "missing; raise audit.max_size_mb or audit.max_backups in the plan")
        return summary


_Key = tuple[str, str, str, str, str]  # client, verb (as the request metrics say it), resource, scope, API group


def _counts(event: dict) -> bool:
    """Whether this is the event that counts its request: a request's end (or panic), a watch's start (its
    end is the watch's life, not a latency)."""
    stage = event.get("stage")
    if event.get("verb", "") == "watch":
        return stage in ("ResponseStarted", "Panic")
    return stage in ("ResponseComplete", "Panic")


def _tally(tallies: dict[_Key, _Tally], event: dict, received: float, finished: float,
           opened: float) -> tuple[float, AuditRequest] | None:
    """Count one request in its client's, verb's, resource's and scope's tally; a request that is not a watch
    also adds its latency, and comes back with it as one of the slowest candidates."""
    verb = event.get("verb", "")
    ref = event.get("objectRef") or {}
    user = event.get("user") or {}
    client = client_of(event.get("userAgent", ""), user.get("username", ""))
    resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    scope = scope_of(verb, ref.get("namespace", ""), ref.get("name", ""))
    key = (client, METRIC_VERBS.get(verb, verb.upper()), resource, scope, ref.get("apiGroup", ""))
    tally = tallies.setdefault(key, _Tally())
    code = str((event.get("responseStatus") or {}).get("code", ""))
    tally.count += 1
    tally.codes[code] += 1
    if verb == "watch":
        return None
    latency = max(0.0, finished - received)
    tally.seconds += latency
    tally.latencies.append(latency)
    return latency, AuditRequest(client=client, verb=key[1], resource=resource, namespace=ref.get("namespace", ""),
                                 name=ref.get("name", ""), latency_s=round(latency, 6), code=code,
                                 at_s=round(received - opened, 3), user=user.get("username", ""))


def _keep_slowest(slowest: list[tuple[float, int, AuditRequest]], entry: tuple[float, int, AuditRequest]) -> None:
    """Keep the SLOWEST_KEPT slowest requests in a heap (the fastest of them first); the event's number breaks
    ties, so requests are never compared."""
    if len(slowest) < SLOWEST_KEPT:
        heapq.heappush(slowest, entry)
    elif entry[0] > slowest[0][0]:
        heapq.heapreplace(slowest, entry)


def _rows(tallies: dict[_Key, _Tally]) -> list[AuditRow]:
    """One row per tally, the most apiserver time first."""
    return sorted((AuditRow(client=k[0], verb=k[1], resource=k[2], scope=k[3], group=k[4], count=t.count,
                            apiserver_s=round(t.seconds, 6), p99_s=Distribution.of(t.latencies, "").p99,
                            codes=dict(t.codes))
                   for k, t in tallies.items()),
                  key=lambda row: (-row.apiserver_s, -row.count))
