"""The apiserver's answers that are not what a client asked for, as exceptions every client shares."""

from __future__ import annotations

from typing import Any

from loadtests.kube import jsonbody


def status_message(body: bytes | str | dict[str, Any]) -> str:
    """The message of a Status body (or the start of whatever else the server sent)."""
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or body)[:300]
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    try:
        data = jsonbody.loads(text)
    except ValueError:
        return text[:300]
    return status_message(data) if isinstance(data, dict) else text[:300]


class ApiError(Exception):
    """An HTTP status other than the one expected; status 0 means no answer (connection refused, timeout)."""

    def __init__(self, status: int, reason: str, method: str = "", path: str = "") -> None:
        self.status = status
        self.reason = reason
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method or path else ""
        super().__init__(f"{where}HTTP {status}: {reason}" if status else f"{where}{reason}")


class Gone(Exception):
    """The resourceVersion asked for is older than the server keeps (410): the caller must LIST again."""


class WatchError(Exception):
    """The server ended a watch with an ERROR event other than 410, or sent something that is not an event."""
