"""Audit log files read one event at a time: audit.k8s.io/v1 Event JSON lines, plain or gzipped (told apart by
their first bytes, not their names), at any level from Metadata up (only the fields every level has are read).

A file that is not an audit log is refused at its first bad line, in one line naming the file, the line and the
reason. One exception: a last line cut short (a log copied while the apiserver wrote it, a gzip stream that
ends early) is skipped and said in a note, since rotating logs are copied that way.
"""

from __future__ import annotations

import gzip
import math
import zlib
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loadtests.errors import UnreadableFile, os_reason
from loadtests.kube import jsonbody
from loadtests.measure.audit import event_time

GZIP_MAGIC = b"\x1f\x8b"
API_VERSION = "audit.k8s.io/v1"
REQUIRED = ("auditID", "stage", "verb", "requestReceivedTimestamp", "stageTimestamp")
FIX = "give audit.k8s.io/v1 Event JSON lines, one event a line, plain or gzipped (the apiserver's log backend)"


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """The fields of one audit event that traffic is measured from (times in epoch seconds). The user is the one
    the request acted as: the impersonated user where there is one, as flow control and authorization saw it."""

    audit_id: str
    stage: str
    verb: str
    received: float
    at: float  # stageTimestamp: when this stage was reached
    username: str
    groups: tuple[str, ...]
    user_agent: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    uri: str
    code: int | None


def event_of(line: bytes) -> AuditEvent:
    """One line as an event; ValueError saying why it is none."""
    try:
        body = jsonbody.loads(line)
    except ValueError as error:
        raise ValueError(f"not JSON ({str(error).splitlines()[0][:120]})") from None
    if not isinstance(body, dict):
        raise ValueError(f"a JSON {type(body).__name__}, not an object")
    if body.get("kind") != "Event" or body.get("apiVersion") != API_VERSION:
        raise ValueError(f"kind {str(body.get('kind'))[:40]!r}, apiVersion {str(body.get('apiVersion'))[:40]!r}: "
                         f"not an {API_VERSION} Event")
    missing = [key for key in REQUIRED if not isinstance(body.get(key), str)]
    if missing:
        raise ValueError(f"an Event without {', '.join(missing)}")
    try:
        received, at = event_time(body["requestReceivedTimestamp"]), event_time(body["stageTimestamp"])
    except ValueError:
        raise ValueError("requestReceivedTimestamp or stageTimestamp is not an RFC 3339 time") from None
    return _event(body, received, at)


def _event(body: dict[str, Any], received: float, at: float) -> AuditEvent:
    user = body.get("impersonatedUser") or body.get("user") or {}
    ref = body.get("objectRef") or {}
    code = (body.get("responseStatus") or {}).get("code")
    return AuditEvent(
        audit_id=body["auditID"], stage=body["stage"], verb=body["verb"], received=received, at=at,
        username=str(user.get("username", "")), groups=tuple(user.get("groups") or ()),
        user_agent=str(body.get("userAgent", "")), group=str(ref.get("apiGroup", "")),
        resource=str(ref.get("resource", "")), subresource=str(ref.get("subresource", "")),
        namespace=str(ref.get("namespace", "")), name=str(ref.get("name", "")),
        uri=str(body.get("requestURI", "")), code=code if isinstance(code, int) else None)


def _lines(path: Path, cut: list[str], label: str) -> Iterator[tuple[int, bytes]]:
    """(number, line) of a file; a gzip stream that ends early ends the lines, said in `cut`."""
    try:
        raw = path.open("rb")
    except OSError as error:
        raise UnreadableFile(f"{path}: cannot read the audit log ({os_reason(error)})") from None
    with raw:
        gzipped = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        handle: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        number = 0
        try:
            for number, line in enumerate(handle, 1):
                yield number, line
        except EOFError:  # a gzip stream cut short: what it held is read
            cut.append(f"{label}: its gzip stream ends early (copied while written?): read to line {number}")
        except (OSError, zlib.error) as error:
            what = "gzipped audit log" if gzipped else "audit log"
            raise UnreadableFile(f"{path}: line {number + 1}: not a readable {what} "
                                 f"({type(error).__name__}: {str(error)[:120]}); {FIX}") from None


def _first_time(path: Path) -> float:
    """When a file's first event was written; infinite for a file with none readable (refused when read)."""
    with closing(_lines(path, [], "")) as lines:
        try:
            return next(event_of(line).at for _, line in lines if line.strip())
        except (StopIteration, ValueError):  # UnreadableFile is a ValueError
            return math.inf


def read_events(paths: Sequence[Path], notes: list[str]) -> Iterator[AuditEvent]:
    """Every event of the files (one log's rotated files), the file whose first event is oldest first, each in
    its order; a note for each last line cut short. UnreadableFile at the first line that is no event."""
    order = sorted(range(len(paths)), key=lambda index: (_first_time(paths[index]), index))
    for index in order:
        path = paths[index]
        label = f"audit file {index + 1} of {len(paths)}"  # the profile names no file: a name may say whose
        read = 0
        for number, line in _lines(path, notes, label):
            if not line.strip():
                continue
            try:
                event = event_of(line)
            except ValueError as why:
                if line.endswith(b"\n") or not read:
                    raise UnreadableFile(f"{path}: line {number}: not an audit log line: {why}; {FIX}") from None
                notes.append(f"{label}: its last line is cut short (a log copied while written): skipped")
                continue
            read += 1
            yield event
