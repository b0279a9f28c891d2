"""A process's own reason for exiting (a component's, Locust's), picked out of its log.

The tail of a log that ends in a Go panic is stack frames, of Locust's its statistics; the cause is above them.
Each process says why it failed in a line of a known shape, and this finds that line:

- zap JSON (etcd): `{"level":"panic","msg":"failed to open database","error":"... no space left on device"}`;
- slog JSON (kwok): `{"level":"ERROR","msg":"Execute exit","err":"no stages found"}`;
- klog (kube-apiserver, scheduler, controller-manager): `F1201 ...] message` or
  `E1201 ... run.go:72] "command failed" err="stat /x: no such file or directory"`;
- a command line refused: `Error: unknown flag: --bogus` (cobra), `flag provided but not defined: -bogus` (Go);
- a bare `panic: ...` or `fatal error: ...` of the Go runtime;
- Python (Locust, its workers): logging's error and critical lines as Locust writes them
  (`[2025-11-28 10:00:00,000] host/CRITICAL/locust.main: message`), with the exception of a traceback that follows
  one (`message: ValueError: bad scenario`); a traceback on its own (an uncaught exception) is fatal.

A fatal line (fatal, panic, a refused command line, an uncaught exception) outranks an error line; of fatal lines
the first is the cause (what follows repeats it), of error lines the last (earlier ones were retried and survived).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

TAIL_BYTES = 256 * 1024  # what is read of a log's end: the failure is there, and a log can be large
MAX_LINE = 300
_KLOG = re.compile(r"^([FE])\d{4} [\d:.]+\s+\d+ [^\]]*\] (.*)$")
_KLOG_STRUCTURED = re.compile(r'^"((?:[^"\\]|\\.)*)"(.*)$')
_KLOG_ERR = re.compile(r'\berr(?:or)?="((?:[^"\\]|\\.)*)"')
_FATAL_PREFIXES = ("panic: ", "fatal error: ", "Error: ", "flag provided but not defined")
_PYTHON_LOG = re.compile(r"^\[[^\]]+\] \S+/(ERROR|CRITICAL)/[^:]+: (.*)$")  # Locust's format of logging's lines
TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
FATAL, ERROR = 2, 1


def read_tail(path: Path) -> list[str]:
    """The last lines of a log ([] when it cannot be read)."""
    try:
        with open(path, "rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - TAIL_BYTES))
            text = log.read().decode(errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    return lines[1:] if size > TAIL_BYTES and lines else lines  # the first may be cut


def classify(line: str) -> tuple[int, str] | None:
    """(FATAL or ERROR, the line in words) for a line that says why a component failed; None for others."""
    stripped = line.strip()
    if stripped.startswith("{"):
        return _json_line(stripped)
    if match := _KLOG.match(stripped):
        return (FATAL if match.group(1) == "F" else ERROR), _klog_text(match.group(2))
    if stripped.startswith(_FATAL_PREFIXES):
        return FATAL, stripped
    if match := _PYTHON_LOG.match(stripped):
        return (FATAL if match.group(1) == "CRITICAL" else ERROR), match.group(2)
    return None


def findings(lines: list[str]) -> list[tuple[int, str]]:
    """Each line that says why a process failed, in order, as classify says it; a Python traceback's exception
    joins the logging line it follows ("Unhandled exception in greenlet: ...: ValueError: boom"), or is fatal on
    its own (an uncaught exception, printed as the interpreter exits); of chained tracebacks, the first's."""
    found: list[tuple[int, str]] = []
    logged = chained = in_traceback = said = False
    owner = -1  # the finding the traceback (chain) belongs to; -1: none, a bare traceback
    for line in lines:
        if line.startswith(TRACEBACK):
            if not chained:  # a traceback of its own, not the next of a chain
                said, owner = False, len(found) - 1 if logged else -1
            in_traceback, chained, logged = True, False, False
        elif in_traceback and line.strip() and not line[:1].isspace():  # the exception it ends in
            in_traceback = False
            if not said and owner >= 0:
                found[owner] = (found[owner][0], f"{found[owner][1]}: {line.strip()}")
            elif not said:
                found.append((FATAL, line.strip()))
            said = True
        elif line.startswith(_CHAINED):
            chained = True
        elif not in_traceback and line.strip():
            item = classify(line)
            logged = item is not None and _PYTHON_LOG.match(line.strip()) is not None
            found += [item] if item is not None else []
    return found


def _json_line(line: str) -> tuple[int, str] | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    level = str(entry.get("level", "")).lower()
    severity = FATAL if level in ("fatal", "panic", "dpanic") else ERROR if level == "error" else None
    if severity is None:
        return None
    message = str(entry.get("msg") or entry.get("message") or "")
    cause = entry.get("error") or entry.get("err")
    return severity, f"{message}: {cause}" if cause and str(cause) not in message else message


def _klog_text(rest: str) -> str:
    """`"command failed" err="stat /x: ..."` as `command failed: stat /x: ...`; an unstructured line as it is."""
    match = _KLOG_STRUCTURED.match(rest)
    if not match:
        return rest
    message, fields = match.group(1), match.group(2)
    err = _KLOG_ERR.search(fields)
    return f"{message}: {err.group(1)}" if err else (message + fields).strip()


def error_line(path: Path) -> str | None:
    """The line of the log at `path` that says why its component failed, in words (None: no such line)."""
    found = findings(read_tail(path))
    fatal = next((text for severity, text in found if severity == FATAL), None)
    error = next((text for severity, text in reversed(found) if severity == ERROR), None)
    chosen = fatal or error
    return chosen[:MAX_LINE] if chosen else None


def last_line(path: Path) -> str | None:
    """The log's last non-empty line (what is shown when no line says why)."""
    lines = [line.strip() for line in read_tail(path) if line.strip()]
    return lines[-1][:MAX_LINE] if lines else None
