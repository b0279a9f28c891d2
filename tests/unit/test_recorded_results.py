"""Every results file recorded in the tree still loads, writes back the keys and values it had, and renders.

The recorded runs are the test fixtures (tests/unit/data/*/results.json) and the benchmarks' raw records
(benchmarks/results/raw/**/*.json.gz: gzipped JSON, either a results file itself or a benchmark's record holding
runs: under "results", or a lesson's "runs" by variant and repeat; found by their shape). Every one is loaded
and written back; a run's report is rendered for a representative subset only (each fixture, the first run of
each benchmark folder and of each lesson: 26 of the 133 runs), as rendering them all takes half a minute.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtests import results
from loadtests.report.html import write_report
from loadtests.results.embedded import runs_from_html
from loadtests.results.sections import SECTIONS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "unit" / "data"
RAW = ROOT / "benchmarks" / "results" / "raw"
FRAME_KEYS = {f.name for f in results.FRAME}


@functools.cache
def _record(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def _runs_in(data: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The results mappings inside a record (a results file is one itself), each with where it sits."""
    if isinstance(data, dict):
        if {"schema_version", "run_id", "steps"} <= data.keys():
            yield where, data
            return
        for key, value in data.items():
            yield from _runs_in(value, f"{where}/{key}")
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _runs_in(value, f"{where}[{index}]")


def _recorded() -> list[tuple[str, Path, str]]:
    """(id, file, where in it) of every recorded run, in a stable order."""
    found = []
    for path in sorted(FIXTURES.rglob("results.json")) + sorted(RAW.rglob("*.json.gz")):
        for where, _ in _runs_in(json.loads(_record(path)), ""):
            found.append((f"{path.relative_to(ROOT)}{where}", path, where))
    return found


RECORDED = _recorded()


def _rendered() -> list[tuple[str, Path, str]]:
    """The subset rendered: every fixture, the first run of each benchmark folder, the first of each lesson."""
    chosen, seen = [], set()
    for entry in RECORDED:
        _, path, _ = entry
        group = path if path.parent.name == "lessons" else path.parent
        if path.is_relative_to(FIXTURES) or group not in seen:
            chosen.append(entry)
            seen.add(group)
    return chosen


def _load(path: Path, where: str) -> dict[str, Any]:
    """A fresh copy of one recorded run (the tests must not share what they might change)."""
    return dict(_runs_in(json.loads(_record(path)), ""))[where]


def _kept(had: Any, wrote: Any, where: str) -> None:
    """What the file had is in what was written back: every key with its value (a newer field the file lacked
    may be added, at its default)."""
    if isinstance(had, dict):
        assert isinstance(wrote, dict), where
        for key, value in had.items():
            assert key in wrote, f"{where}.{key} was dropped"
            _kept(value, wrote[key], f"{where}.{key}")
    elif isinstance(had, list):
        assert isinstance(wrote, list) and len(wrote) == len(had), where
        for index, (value, written) in enumerate(zip(had, wrote, strict=True)):
            _kept(value, written, f"{where}[{index}]")
    else:
        assert wrote == had, f"{where}: {had!r} written back as {wrote!r}"


def test_the_recorded_runs_are_all_found() -> None:
    assert len(RECORDED) >= 133 and sum(path.is_relative_to(FIXTURES) for _, path, _ in RECORDED) == 4


@pytest.mark.parametrize(("path", "where"), [(p, w) for _, p, w in RECORDED], ids=[i for i, _, _ in RECORDED])
def test_a_recorded_run_loads_and_writes_back_what_it_had(path: Path, where: str) -> None:
    data = _load(path, where)
    written = results.to_dict(results.from_dict(data))
    assert len(written["steps"]) == len(data["steps"])
    for index, (had, wrote) in enumerate(zip(data["steps"], written["steps"], strict=True)):
        assert set(wrote) == FRAME_KEYS | SECTIONS.fields, "a step's keys stay flat: the frame's and the sections'"
        for key in had:
            assert key in wrote, f"steps[{index}].{key} was dropped"
            if SECTIONS.owner(key) is not None:
                _kept(had[key], wrote[key], f"steps[{index}].{key}")
    assert results.to_dict(results.from_dict(written)) == written


@pytest.mark.parametrize(("path", "where"), [(p, w) for _, p, w in _rendered()], ids=[i for i, _, _ in _rendered()])
def test_a_recorded_run_renders(path: Path, where: str, tmp_path: Path) -> None:
    data = _load(path, where)
    (tmp_path / results.RESULTS_FILE).write_text(json.dumps(data))
    page = write_report(tmp_path)
    ((_, carried),) = runs_from_html(page)
    assert [len(s.client) for s in carried.steps] == [len(s.get("client", [])) for s in data["steps"]]
