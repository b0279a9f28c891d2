"""A soak's page (soak.html) and its JUnit suite, built from what is on disk at any time: every series judged
(analysis/soak.py), the slope table with verdicts, what grew first, and each series as a long time-series chart,
downsampled for the page (the raw samples stay in the run folder's soak/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadtests.analysis.soak import (
    FALLS,
    GROWS,
    INCONCLUSIVE,
    NOT_MEASURED,
    SoakJudgement,
    Trend,
    amount,
    downsample,
    judge,
    trend_text,
)
from loadtests.report import charts, page
from loadtests.report.junit import Case, Suite
from loadtests.results.soak import SAMPLES_FILE, SOAK_DIR, SoakMeta, SoakSample, load_meta, load_samples

SOAK_REPORT_FILE = "soak.html"
PAGE_POINTS = 600  # a series' points on the page at most
CSS = {GROWS: "fail", FALLS: "warn", INCONCLUSIVE: "skip", NOT_MEASURED: "skip"}


@dataclass
class SoakRow:
    """A row of the slope table, with its figures in the series' unit."""

    trend: Trend
    level: str
    slope: str
    interval: str
    growth_pct: str
    to_limit: str
    css: str


def row(t: Trend) -> SoakRow:
    pct = t.growth_pct_per_h
    interval = ("—" if t.low_per_h is None or t.high_per_h is None
                else f"[{amount(t.low_per_h, t.unit)}, {amount(t.high_per_h, t.unit)}]")
    to_limit = "—" if t.hours_to_limit is None else f"{t.hours_to_limit:,.1f} h to {amount(t.limit, t.unit)}"
    return SoakRow(t, amount(t.level, t.unit), amount(t.slope_per_h, t.unit), interval,
                   "—" if pct is None else f"{pct:+.2f} %", to_limit, CSS.get(t.verdict, ""))


def soak_panels(samples: list[SoakSample], found: SoakJudgement) -> list[charts.Panel]:
    """A chart per measured series, the growing ones first (in the order they started to grow)."""
    hours = [s.t_s / 3600 for s in samples]
    grown = [t.series for t in found.grown]
    ordered = grown + [t.series for t in found.trends if t.series not in grown and t.verdict != NOT_MEASURED]
    units = {t.series: t for t in found.trends}
    panels = []
    for n, name in enumerate(ordered):
        t, ys = units[name], [s.values.get(name) for s in samples]
        xs, shown = downsample(hours, ys, PAGE_POINTS)
        colour = charts.SLO_COLOUR if t.verdict == GROWS else charts.PALETTE[0]
        settled = f"; judged from {found.settle_s / 60:.1f} min" if found.settle_s else ""
        panels.append(charts.Panel(f"soak-{n}", f"{name}: {t.verdict}", f"soak sampler ({len(ys)} samples, "
                                   f"{len(xs)} shown{settled})", charts.soak_figure(t.unit, xs, shown, colour)))
    return panels


def soak_suites(found: SoakJudgement, meta: SoakMeta) -> list[Suite]:
    """One case per series judged: `grows` fails it, `not measured` skips it."""
    cases = []
    for t in found.trends:
        case = Case("soak", t.series, failure_type="soak", details=trend_text(t))
        if t.verdict == GROWS:
            case.failure = trend_text(t)
        elif t.verdict == NOT_MEASURED:
            case.skipped = "not measured"
        cases.append(case)
    return [Suite(name=f"soak: {meta.step}", cases=cases, time_s=found.hours_measured * 3600,
                  properties={"hours": f"{found.hours_measured:g}", "interval_s": f"{meta.interval_s:g}",
                              "settle_s": f"{found.settle_s:g}", "rule": found.rule})]


def render(folder: Path, meta: SoakMeta, samples: list[SoakSample], found: SoakJudgement) -> str:
    panels = soak_panels(samples, found)
    return page.render("soak.html", meta=meta, found=found, rows=[row(t) for t in found.trends],
                       grown=[row(t) for t in found.grown], panels=panels, figures=charts.payload(panels),
                       raw=f"{SOAK_DIR}/{SAMPLES_FILE}", samples=len(samples), folder=str(folder))


def write_soak_report(folder: Path) -> tuple[Path, list[Suite]]:
    """soak.html from the soak's files now, and its JUnit suites (for the run's junit.xml)."""
    meta, samples = load_meta(folder), load_samples(folder)
    found = judge(samples, meta)
    return page.write(Path(folder) / SOAK_REPORT_FILE, render(folder, meta, samples, found)), soak_suites(found, meta)
