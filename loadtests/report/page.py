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

from loadtests.analysis.formats import bounded, duration, in_unit, millis, number, percent, size  # the page's filters

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


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def write(path: Path, html: str) -> Path:
    """Write a page whole or not at all: a reader never opens half a report."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path
