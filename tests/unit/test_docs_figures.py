"""The docs' measured figures are their results files' figures.

Every figure README.md and docs/*.md state comes from a results file a benchmark wrote (benchmarks/results/*.md,
the raw runs behind it in benchmarks/results/raw/). These tests hold the docs to that: every results file they
name exists, and the figures that once drifted from their files (each read here from its file, or from the raw
runs the file was built from, so a rerun benchmark moves the expected text with it) are quoted as the file has
them.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
RAW = RESULTS / "raw"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _page(name: str) -> str:
    """A page's text with its lines joined, so a quoted figure may run over a line end."""
    return " ".join((ROOT / name).read_text().split())


def _results(name: str) -> str:
    return (RESULTS / name).read_text()


def _found(pattern: str, text: str, where: str) -> re.Match[str]:
    match = re.search(pattern, text)
    assert match, f"{where} no longer says {pattern!r}: the benchmark's output changed, and this test with it"
    return match


def _quoted(page: str, *texts: str) -> None:
    said = _page(page)
    missing = [text for text in texts if text not in said]
    assert not missing, f"{page} does not quote its results file's figures: {missing}"


@functools.cache
def _lesson(name: str) -> dict[str, Any]:
    return json.loads(gzip.decompress((RAW / "lessons" / f"{name}.json.gz").read_bytes()))


def _comparison(lesson: str, measure: str, against: str = "") -> dict[str, Any]:
    """A lesson's comparison of one measure (against one variant, or the first the lesson compares)."""
    return next(c for c in _lesson(lesson)["lesson_json"]["comparisons"]
                if c["measure"] == measure and against in ("", c["against"]))


def _machine_cpu(lesson: str, variant: str) -> list[float]:
    """The machine's CPU (% of one core, over the window) in each run of a lesson's variant."""
    return [step["machine_cpu_percent"] for key, run in _lesson(lesson)["runs"].items()
            if key.split("/")[0] == variant for step in run["steps"]]


def _span(values: list[float], unit: str = " %", digits: int = 0) -> str:
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}{unit}"


# --- the results files the docs name ---------------------------------------------------------------------------

def test_every_results_file_the_docs_name_exists() -> None:
    """`benchmarks/results/NAME.md` anywhere, and a results file named by its file name alone (`node_ramp.md`)."""
    docs = {page.name for page in PAGES}
    named = []
    for page in PAGES:
        text = page.read_text()
        named += [(page.name, path) for path in re.findall(r"benchmarks/results/[\w-]+\.md", text)]
        named += [(page.name, f"benchmarks/results/{name}") for name in re.findall(r"`([\w-]+\.md)`", text)
                  if name not in docs]
    assert len({path for _, path in named}) >= 15, named
    missing = sorted({f"{page}: {path}" for page, path in named if not (ROOT / path).is_file()})
    assert not missing, f"results files the docs name that do not exist: {missing}"


# --- figures quoted from results files ---------------------------------------------------------------------------

def test_the_capacity_search_bounds_are_quoted_as_the_search_ended() -> None:
    found = _found(r"largest scale where every SLO held: ([\d,]+) nodes.*?; at ([\d,]+):",
                   _results("plan_capacity_capacity.md"), "plan_capacity_capacity.md")
    held, failed = (int(n.replace(",", "")) for n in found.groups())
    apart = f"{failed / held - 1:.1%}".replace("%", " %")
    _quoted("docs/scale.md", f"its bounds, {held:,} and {failed:,} nodes, are {apart} apart")


def test_the_profiling_cost_is_quoted_as_its_results_file_says() -> None:
    text, where = _results("profiling_cost.md"), "profiling_cost.md"

    def pairs(what: str) -> tuple[list[float], str, str]:
        line = _found(rf"{what}: per pair \(on − off\) ([^(]+) points of a core \(median ([+-][\d.]+)\); .*?p = "
                      r"([\d.]+)", text, where)
        return [float(v) for v in line.group(1).split(",")], line.group(2), line.group(3)

    apiserver, apiserver_median, apiserver_p = pairs("kube-apiserver CPU")
    etcd, etcd_median, etcd_p = pairs("etcd CPU")
    own = _found(r"median ([+-][\d.]+ %)\); the \"off\" runs ranged ([\d.]+-[\d.]+ %) of a core", text, where)
    medians = _found(r"etcd ([\d.]+ %) vs ([\d.]+ %); POST pods p50 ([\d.]+) vs ([\d.]+) ms", text, where)
    rows = re.findall(r"^\| \d+ \| (on|off) \|(?:[^|]*\|){4} ([\d.]+) ms \|", text, re.M)
    watch_off = [float(value) for state, value in rows if state == "off"]
    assert len(rows) == 12 and len(watch_off) == 6, rows
    _quoted("docs/measured.md",
            f"kube-apiserver at {min(apiserver):+.1f} to {max(apiserver):+.1f} points of a core (median "
            f"{apiserver_median}, {own.group(1)} of itself; its runs without profiling ranged {own.group(2)} of a core",
            f"etcd at {min(etcd):+.1f} to {max(etcd):+.1f} points (median {etcd_median}; medians {medians.group(1)} "
            f"on against {medians.group(2)} off)",
            f"(medians {medians.group(3)} ms on against {medians.group(4)} ms off)",
            f"({_span(watch_off, ' ms', 1)} off)",
            f"p = {apiserver_p} for both CPUs")
    assert apiserver_p == etcd_p
    _quoted("README.md", f"a median {apiserver_median} points of a core to the apiserver at 200 nodes (six pairs, "
                         f"p = {apiserver_p},")


def test_the_audit_cost_is_quoted_as_its_results_file_says() -> None:
    text = _results("audit_cost.md")
    p = _found(r"p = ([\d.]+)", text, "audit_cost.md").group(1)
    log = _found(r"was ([\d.]+ MiB)\.", text, "audit_cost.md").group(1)
    _quoted("docs/measured.md", f"gives p = {p}, so at", f"The log of a whole 500-node run was {log}.")


def test_prometheus_cost_is_quoted_as_its_results_file_says() -> None:
    text = _results("prometheus_cost.md")
    steps = re.findall(r"^- ([\d,]+ nodes: Prometheus [\d.]+ % of one core, \d+ MiB RSS at most);", text, re.M)
    assert len(steps) == 3, steps
    last = _found(r"1,000 nodes: .*?\(kube-apiserver ([\d.]+ %) and ([\d.]+ %)\)", text, "prometheus_cost.md")
    _quoted("docs/promql.md", *steps, "Prometheus is off by default",
            f"kube-apiserver, which serves its scrapes, used {last.group(1)} of a core at 1,000 nodes with it and "
            f"{last.group(2)} without")


def test_the_default_plans_figure_series_are_quoted_as_counted() -> None:
    found = _found(r"searches (\d+) figure series \((\d+) compared figures", _results("figure_series.md"),
                   "figure_series.md")
    _quoted("docs/compare.md", f"A run of the default plan has {found.group(1)} figure series ({found.group(2)} "
                               "compared figures")


# --- figures quoted from the raw lessons ---------------------------------------------------------------------

def test_relist_storm_is_quoted_as_its_raw_runs_say() -> None:
    heap = _comparison("relist-storm", "restarted kube-apiserver Go heap high-water mark")
    received = _comparison("relist-storm", "bytes the informers received to get back in sync")
    mib = [[v / 2**20 for v in side] for side in (heap["warned"], heap["fix"])]
    gib = {f"{v / 2**30:.1f} GiB" for v in received["warned"] + received["fix"]}
    assert len(gib) == 1, gib
    _quoted("docs/lessons.md",
            f"{_span(mib[0], ' MiB', 1)} against {_span(mib[1], ' MiB', 1)} (×{heap['effect']:.2f}, every run apart)",
            f"received about {gib.pop()} to get back in sync",
            f"the machine at {_span(_machine_cpu('relist-storm', 'list-watch'))} of its 2 cores over the window",
            f"with the machine at {_span(_machine_cpu('relist-storm', 'watch-list'))}, the Python informers")
    assert heap["verdict"] == "reproduced"


def test_apf_noisy_neighbour_machine_cpu_is_quoted_per_variant() -> None:
    saturated = {f"{v:.0f} %" for variant in ("apf-off", "apf-default")
                 for v in _machine_cpu("apf-noisy-neighbour", variant)}
    assert len(saturated) == 1, saturated
    _quoted("docs/lessons.md",
            f"took the machine to {saturated.pop()} of its 2 cores with flow control off and with APF's defaults, "
            f"and to {_span(_machine_cpu('apf-noisy-neighbour', 'apf-flowschema'))} with the noisy tenant's own "
            "FlowSchema")
    refused = _comparison("apf-noisy-neighbour", "429s to the noisy tenant per second", "apf-default")["fix"]
    _quoted("docs/lessons.md", f"nobody but the noisy tenant was refused ({_span(refused, ' a second', 1)})")
