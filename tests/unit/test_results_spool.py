"""A window's samples spooled to disk: read back exactly, and the sampler's memory does not grow with them."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from loadtests.measure import cluster_health as health
from loadtests.measure import processes
from loadtests.results.health import HealthSample
from loadtests.results.spool import Spool
from tests.unit.test_measure_probes import unreachable_target


def test_samples_come_back_exactly_and_in_order() -> None:
    spool: Spool[HealthSample] = Spool(lambda found: HealthSample(**found))
    written = [HealthSample(0.1, {"nodes": 5, "p99": 0.1 + 0.2, "tiny": 1e-300, "gone": None}, {"p99": "<"}),
               HealthSample(5.123, {"cpu.machine": 123.4, "z": -0.0})]
    for sample in written:
        spool.append(sample)
    assert spool.items() == written and spool.count == 2
    assert type(spool.items()[0].values["nodes"]) is int  # an int stays an int
    spool.append(HealthSample(10.0))  # appending goes on after a read
    assert spool.items() == [*written, HealthSample(10.0)]
    spool.close()
    spool.close()


def test_a_named_spool_adds_to_its_file_and_each_line_is_there_when_append_returns(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text('{"t_s": 0.0, "values": {}, "bounds": {}}\n')  # an earlier writer's line stays
    spool: Spool[HealthSample] = Spool(lambda found: HealthSample(**found), path, durable=True)
    spool.append(HealthSample(1.5, {"nodes": 3}))
    assert path.read_text().splitlines()[1] == '{"t_s":1.5,"values":{"nodes":3},"bounds":{}}'  # no close needed
    assert spool.items() == [HealthSample(0.0), HealthSample(1.5, {"nodes": 3})]
    spool.close()
    assert path.is_file()  # a named file outlives its spool


def test_the_memory_held_does_not_grow_with_the_samples() -> None:
    spool: Spool[HealthSample] = Spool(lambda found: HealthSample(**found))
    values = {f"figure_{k}.{k}": k / 7 for k in range(60)}  # a health sample's size
    tracemalloc.start()
    try:
        grown = []
        for _ in range(2):  # the first round warms the allocator's free lists up
            before = tracemalloc.get_traced_memory()[0]
            for n in range(3000):  # over four hours at 5 s
                spool.append(HealthSample(n * 5.0, {key: value + n for key, value in values.items()}))
            grown.append(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
    assert grown[1] < 16 * 1024, grown  # kept in a list: about 15 MiB
    assert len(spool.items()) == 6000
    spool.close()


def test_the_health_summary_is_the_spooled_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes.CpuMeter, "MIN_INTERVAL_S", 0.0)
    sampler = health.ClusterHealthSampler(unreachable_target({"harness": [os.getpid()]}), interval_s=0.05)
    sampler.start()
    taken = [sampler.sample() for _ in range(3)]
    result = sampler.gather()
    remaining = iter(result.samples)  # the thread's own samples among them (one may equal a taken one), in order
    assert all(any(found == sample for found in remaining) for sample in taken)
    assert result.summary.samples == len(result.samples) == sampler.samples.count
    machine = [s.values["cpu.machine"] for s in result.samples if s.values.get("cpu.machine") is not None]
    assert result.summary.cpu_machine_max == (max(machine) if machine else None)
