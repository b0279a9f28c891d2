"""The results a report page carries inside it, so the HTML that travels (a CI artifact, a ticket's attachment) can be
compared, put in a history or turned back into a run folder without the folder itself."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests.errors import UnreadableFile, text_of, unreadable
from loadtests.results import RunResult, from_dict

EMBEDDED_ID = "loadtest-results"  # the <script type="application/json"> element holding them
EMBEDDED_FORMAT = 1
_EMBEDDED_START = f'<script type="application/json" id="{EMBEDDED_ID}">'


@dataclass
class EmbeddedRun:
    """One run a page carries: its name in the page ("" for a run report's own run, "repeat-2" for a repeat,
    "A/repeat-1" for a comparison's side), and its results as results.json holds them (secrets left out)."""

    name: str
    results: dict[str, Any]


def encode_embedded(kind: str, runs: list[EmbeddedRun], extra: dict[str, Any] | None = None) -> str:
    """The page's data element body: JSON naming the page's kind, with the runs gzipped and base64-encoded
    (results compress about tenfold, and base64 keeps them safe inside a <script> element)."""
    import base64
    import gzip

    packed = gzip.compress(json.dumps([dataclasses.asdict(r) for r in runs], separators=(",", ":")).encode(),
                           mtime=0)
    return json.dumps({"format": EMBEDDED_FORMAT, "kind": kind, "runs": base64.b64encode(packed).decode(),
                       **(extra or {})})


def _embedded_body(html: str, path: Path) -> dict[str, Any]:
    start = html.find(_EMBEDDED_START)
    if start < 0:
        raise UnreadableFile(f"{path}: the page carries no results (written by an older version, or not a "
                             "loadtest report): give its run folder instead, or rebuild the page with "
                             "`loadtest report RUN_DIR`")
    start += len(_EMBEDDED_START)
    end = html.find("</script>", start)
    try:
        data = json.loads(html[start:end])
    except ValueError as error:
        raise unreadable(path, "report's embedded results", error, "the page was cut short or edited") from None
    if not isinstance(data, dict) or data.get("format") != EMBEDDED_FORMAT:
        raise UnreadableFile(f"{path}: its embedded results are in format {data.get('format')!r} where this "
                             f"tool reads {EMBEDDED_FORMAT}" if isinstance(data, dict) else
                             f"{path}: not a readable report's embedded results (not a mapping)")
    return data


def embedded(path: Path) -> tuple[str, list[EmbeddedRun]]:
    """A report page's kind ("run", "repeats", "compare", "lesson") and the runs it carries, or one line saying
    why there are none (UnreadableFile)."""
    import base64
    import binascii
    import gzip
    import zlib

    path = Path(path)
    try:
        page = path.read_bytes()
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: no such report page") from None
    except OSError as error:
        raise unreadable(path, "report page", error) from None
    try:
        html = text_of(page, path, "report page", "give a report.html the harness wrote, or its run folder")
    except UnreadableFile:
        # the results inside are ASCII: a page re-saved in another encoding may still hold them
        html = page.decode("utf-8", errors="replace")
        if _EMBEDDED_START not in html:
            raise
    data = _embedded_body(html, path)
    try:
        runs = json.loads(gzip.decompress(base64.b64decode(data.get("runs", ""), validate=True)))
        found = [EmbeddedRun(name=str(r["name"]), results=r["results"]) for r in runs]
    except (binascii.Error, OSError, EOFError, zlib.error, ValueError, KeyError, TypeError) as error:
        raise unreadable(path, "report's embedded results", error, "the page was cut short or edited") from None
    return str(data.get("kind", "")), found


def runs_from_html(path: Path) -> list[tuple[str, RunResult]]:
    """The runs a run report or a report of repeats carries, each with its name in the page; a comparison or a
    lesson page, or a page with none, is refused in one line (UnreadableFile)."""
    kind, runs = embedded(path)
    if kind not in ("run", "repeats"):
        raise UnreadableFile(f"{path} is a {kind or 'loadtest'} page, not a run's report: give the run reports "
                             "(report.html) or run folders it was built from")
    out = []
    for run in runs:
        try:
            out.append((run.name, from_dict(run.results)))
        except UnreadableFile as error:
            raise UnreadableFile(f"{path}: {error}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise unreadable(path, "report's embedded results", error) from None
    if not out:
        raise UnreadableFile(f"{path}: the page carries no run")
    return out
