"""The HTML machinery shared by the run report and compare: templates, number formats, inline plotly.js.

Autoescaping is on; the only unescaped text is plotly.js itself, embedded once so a page opens with no network.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import plotly.offline
from markupsafe import Markup

from loadtests import results
from loadtests.analysis.formats import bounded, duration, in_unit, millis, number, percent, size  # the page's filters
from loadtests.errors import UnreadableFile
from loadtests.report.redact import redact
from loadtests.results import RunResult
from loadtests.results.embedded import EmbeddedRun, encode_embedded

TEMPLATES = Path(__file__).parent / "templates"


@functools.cache
def plotly_js() -> Markup:
    """The plotly.js bundle that ships with the plotly package (no CDN)."""
    source = plotly.offline.get_plotlyjs()
    if "</script" in source.lower():  # would end our <script> element early
        source = source.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")
    return Markup(source)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(duration=duration, bounded=bounded, millis=millis, size=size, number=number, percent=percent,
                       in_unit=in_unit)
    env.globals["plotly_js"] = plotly_js
    return env


def script_json(text: str) -> Markup:
    """JSON text safe inside a <script> element: no "</script" (nor "<!--") can end or confuse it."""
    return Markup(text.replace("<", "\\u003c"))


def embedded(kind: str, runs: list[tuple[str, RunResult]], extra: dict[str, Any] | None = None) -> Markup:
    """The page's data element: the results it was built from (secrets left out, as the page leaves them out),
    so the HTML alone is enough for `loadtest compare`, `loadtest history` and `loadtest report --from`."""
    return script_json(encode_embedded(
        kind, [EmbeddedRun(name, redact(results.to_dict(run))) for name, run in runs], extra))


def embedded_folder(kind: str, folder: Path, extra: dict[str, Any] | None = None) -> Markup:
    """Every results file under a folder (a lesson's runs), each named by its folder's path inside it."""
    found = []
    for path in sorted(Path(folder).rglob(results.RESULTS_FILE)):
        try:
            found.append((str(path.parent.relative_to(folder)), results.load(path.parent)))
        except (OSError, ValueError, UnreadableFile):
            continue  # the page says what it could not read; the data carries what it could
    return embedded(kind, found, extra)


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def write(path: Path, html: str) -> Path:
    """Write a page whole or not at all: a reader never opens half a report."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path
