"""A step holds its measurements as sections, one per part that writes them, registered in results/sections.py,
while results.json keeps a step's keys flat as it always has: so old files load, and readers that name a figure as
the step's attribute (step.etcd, step.client) need not know which section holds it."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from loadtests import results
from loadtests.errors import UnreadableFile
from loadtests.results.etcd import EtcdSection, EtcdStats
from loadtests.results.loadgen import ClientStat, LoadgenSection
from loadtests.results.schema import Registry, Section
from loadtests.results.sections import SECTIONS


def _step(**measured: Any) -> results.StepResult:
    return results.StepResult(index=0, name="s", nodes=1, pods_per_node=1, started_at="t", duration_s=1.0, **measured)


def test_a_sections_field_reads_and_writes_as_the_steps_attribute() -> None:
    step = _step(etcd=EtcdStats(db_size_bytes=5.0))
    step.client = [ClientStat("GET", "pods", 1, 0, 1.0, None, None, None, None)]
    assert step.section(EtcdSection).etcd.db_size_bytes == 5.0 and step.etcd.db_size_bytes == 5.0
    assert step.section(LoadgenSection).client == step.client and len(step.client) == 1
    step.put(EtcdSection(etcd=EtcdStats(keys_total=3.0)))
    assert step.etcd.keys_total == 3.0 and step.etcd.db_size_bytes is None


def test_an_unmeasured_section_is_its_empty_default() -> None:
    step = _step()
    assert step.etcd == EtcdStats() and step.client == [] and step.scheduling is None
    step.notes.append("frame fields stay the step's own")
    assert step.notes == ["frame fields stay the step's own"]
    with pytest.raises(AttributeError):
        _ = step.no_such_figure
    with pytest.raises(TypeError, match="no_such_figure"):
        _step(no_such_figure=1)
    with pytest.raises(KeyError, match="not a registered section"):
        step.section(EtcdStats)


def test_a_step_copies_and_compares_with_its_sections() -> None:
    step = _step(etcd=EtcdStats(db_size_bytes=5.0))
    copied = copy.deepcopy(step)
    assert copied == step and copied.etcd is not step.etcd
    copied.etcd.db_size_bytes = 6.0
    assert copied != step
    renamed = dataclasses.replace(step, name="t")
    assert renamed.name == "t" and renamed.etcd == step.etcd and step.name == "s"


def test_a_step_is_written_flat_in_the_frame_then_the_registrys_order() -> None:
    written = results.step_dict(_step(client=[]))
    keys = list(written)
    assert "sections" not in written and set(keys) == {f.name for f in results.FRAME} | SECTIONS.fields
    section_keys = [key for key in keys if SECTIONS.owner(key)]
    assert section_keys == [name for section in SECTIONS for name in section.fields]
    assert keys[:7] == ["index", "name", "nodes", "pods_per_node", "started_at", "duration_s", "ramp"]
    assert keys[-2:] == ["status", "saturation"]


def _run_with(step: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": results.SCHEMA_VERSION, "run_id": "r", "plan": {}, "environment": {}, "steps": [step]}


def test_a_file_without_a_sections_keys_loads_it_empty_and_a_newer_version_is_refused() -> None:
    frame = {"index": 0, "name": "s", "nodes": 1, "pods_per_node": 1, "started_at": "t", "duration_s": 1.0}
    run = results.from_dict(_run_with({**frame, "client": [], "unknown_key": 1}))
    assert run.steps[0].etcd == EtcdStats() and run.steps[0].health.samples == []
    assert results.step_dict(run.steps[0]) == results.step_dict(_step())
    assert results.SECTION_VERSIONS not in results.step_dict(run.steps[0])  # every section at 1: files as before
    with pytest.raises(UnreadableFile, match="'etcd' version 2"):
        results.from_dict(_run_with({**frame, results.SECTION_VERSIONS: {"etcd": 2}}))


@dataclass
class _Renamed:
    count: int = 0
    names: list[str] = field(default_factory=list)


def _renamed_loader(step: Any, version: int) -> _Renamed:
    """Version 1 called the count `total`."""
    return _Renamed(count=step.get("total" if version == 1 else "count", 0), names=list(step.get("names", [])))


def test_a_section_reads_its_older_layout_with_its_own_loader() -> None:
    section = Section("renamed", _Renamed, version=2, loader=_renamed_loader)
    assert section.read({"total": 3}, 1) == _Renamed(count=3)
    assert section.read({"count": 4, "names": ["a"]}, 2) == _Renamed(count=4, names=["a"])
    assert Section("renamed", _Renamed).read({"count": 4, "other": 1}) == _Renamed(count=4)


def test_a_key_owned_by_two_sections_is_refused() -> None:
    @dataclass
    class Twice:
        etcd: int = 0

    with pytest.raises(ValueError, match="'etcd'"):
        Registry(Section("etcd", EtcdSection), Section("twice", Twice))
