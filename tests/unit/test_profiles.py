"""pprof profiles read in Python: the recorded profiles of a real kube-apiserver and etcd give the totals and
shares `go tool pprof -top` gives (its output recorded beside them), groups add up, results keep them."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from loadtests import results
from loadtests.analysis import profiles
from loadtests.results import RunResult, StepResult
from loadtests.results.profiles import ComponentProfile, ProfileFunction, ProfileGroup

DATA = Path(__file__).parent / "data" / "profiles"
# (recorded profile, component, kind, the sample type pprof was asked for)
RECORDED = [("kube-apiserver_v1.37.2.cpu", "kube-apiserver", "cpu", "cpu"),
            ("etcd_v3.6.16.cpu", "etcd", "cpu", "cpu"),
            ("etcd_v3.6.16.heap", "etcd", "heap", "inuse_space")]
UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "B": 1, "kB": 2**10, "MB": 2**20, "GB": 2**30}
ROW = re.compile(r"^\s*([\d.]+)(\w+|µs)\s+([\d.]+)%\s+[\d.]+%\s+([\d.]+)(\w+|µs)\s+([\d.]+)%\s+(.+?)\s*$")
TOTAL = re.compile(r"of ([\d.]+)(\w+|µs) total")


def pprof_top(text: str) -> tuple[float, list[tuple[str, float, float]]]:
    """`go tool pprof -top` output: the total (in seconds or bytes) and its rows (name, flat %, cum %)."""
    total = TOTAL.search(text)
    assert total, text
    rows = [(m.group(7), float(m.group(3)), float(m.group(6))) for line in text.splitlines()
            if (m := ROW.match(line))]
    return float(total.group(1)) * UNITS[total.group(2)], rows


def summary(name: str, component: str, kind: str) -> ComponentProfile:
    decoded = profiles.decode((DATA / f"{name}.pb.gz").read_bytes())
    return profiles.summarise([decoded], component, kind, [f"{name}.pb.gz"], offset_s=0.0, seconds=5.0, top=40)


@pytest.mark.parametrize(("name", "component", "kind", "sample_type"), RECORDED)
def test_the_recorded_profiles_read_as_go_tool_pprof_reads_them(name: str, component: str, kind: str,
                                                                 sample_type: str) -> None:
    found = summary(name, component, kind)
    total, rows = pprof_top((DATA / f"{name}.top.txt").read_text())
    assert found.sample_type == sample_type
    scale = 1e-9 if found.unit == "nanoseconds" else 1.0
    # pprof prints the total to 4 significant digits
    assert found.total is not None and found.total * scale == pytest.approx(total, rel=1e-3)
    assert len(rows) == 20
    # its top function is ours, and every row it shows has our shares (pprof rounds to 0.01 %)
    assert found.functions[0].name == rows[0][0]
    ours = {f.name: f for f in found.functions}
    for function, flat, cum in rows:
        assert function in ours or flat <= found.functions[-1].flat_pct, function
        if function in ours:
            assert ours[function].flat_pct == pytest.approx(flat, abs=0.011), function
            assert ours[function].cum_pct == pytest.approx(cum, abs=0.011), function


@pytest.mark.skipif(shutil.which("go") is None, reason="needs go (go tool pprof)")
@pytest.mark.parametrize(("name", "component", "kind", "sample_type"), RECORDED)
def test_go_tool_pprof_says_what_the_recorded_output_says(name: str, component: str, kind: str,
                                                          sample_type: str) -> None:
    """The recorded outputs are pprof's own (the first `go tool pprof` on a machine builds the tool: a minute)."""
    done = subprocess.run(["go", "tool", "pprof", "-top", "-nodecount=20", f"-sample_index={sample_type}",
                           str(DATA / f"{name}.pb.gz")], capture_output=True, text=True, timeout=300, check=True)
    assert pprof_top(done.stdout) == pprof_top((DATA / f"{name}.top.txt").read_text())
    assert summary(name, component, kind).functions[0].name == pprof_top(done.stdout)[1][0][0]


def test_a_cpu_profile_says_how_much_of_a_core_it_saw() -> None:
    found = summary("kube-apiserver_v1.37.2.cpu", "kube-apiserver", "cpu")
    # pprof: "Duration: 5s, Total samples = 1380ms (27.59%)"
    assert profiles.cpu_percent(found) == pytest.approx(27.6, abs=0.05)
    heap = summary("etcd_v3.6.16.heap", "etcd", "heap")
    assert heap.unit == "bytes" and profiles.cpu_percent(heap) is None


@pytest.mark.parametrize(("name", "component", "kind", "sample_type"), RECORDED)
def test_the_groups_of_a_profile_add_up_to_all_of_it(name: str, component: str, kind: str, sample_type: str) -> None:
    found = summary(name, component, kind)
    assert sum(g.flat_pct for g in found.groups) == pytest.approx(100.0, abs=0.1)
    assert all(g.cum_pct >= g.flat_pct for g in found.groups)
    assert [g.flat_pct for g in found.groups] == sorted((g.flat_pct for g in found.groups), reverse=True)


def test_a_recorded_apiserver_profile_has_the_work_it_did() -> None:
    """The recording: LISTs of pods and nodes, ConfigMaps created and deleted, over client-certificate TLS."""
    groups = {g.group: g for g in summary("kube-apiserver_v1.37.2.cpu", "kube-apiserver", "cpu").groups}
    for expected in ("serialisation", "GC and memory", "TLS and crypto", "HTTP/2 and net/http", "etcd client"):
        assert groups[expected].flat_pct > 1.0, groups
    # etcd's own groups are etcd's: an apiserver never shows them, nor etcd the apiserver's
    assert not {"raft", "WAL", "bbolt (backend)"} & set(groups)
    etcd = {g.group for g in summary("etcd_v3.6.16.cpu", "etcd", "cpu").groups}
    assert "MVCC and watch" in etcd and not {"watch cache", "etcd client", "audit"} & etcd


def test_every_group_pattern_compiles_and_no_group_is_named_twice() -> None:
    names = [g.name for g in profiles.GROUPS]
    assert len(names) == len(set(names)) and profiles.OTHER not in names
    for group in profiles.GROUPS:
        for pattern in group.patterns:
            re.compile(pattern)
        assert set(group.components) <= {profiles.APISERVER, profiles.ETCD}


# ----------------------------------------------------------------------------------- a profile written here
def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _packed(number: int, values: list[int]) -> bytes:
    return _field(number, b"".join(_varint(v) for v in values))


def written_profile(stacks: list[tuple[list[str], int]], packed: bool = True) -> bytes:
    """A CPU profile of these stacks (innermost first) and values, as a Go program writes one; with packed=False
    the repeated fields are written one by one (the format allows both). The first two frames of every stack
    share one location, the innermost inlined into the other."""
    strings = ["", "samples", "count", "cpu", "nanoseconds"]
    functions: dict[str, int] = {}
    locations: dict[tuple[int, ...], int] = {}
    body = _field(1, _field(1, 1) + _field(2, 2)) + _field(1, _field(1, 3) + _field(2, 4))
    for stack, value in stacks:
        ids = []
        frames = [stack[:2], *[[name] for name in stack[2:]]]  # location 1 holds two lines: an inlined call
        for frame in frames:
            for name in frame:
                if name not in functions:
                    strings.append(name)
                    functions[name] = len(functions) + 1
            key = tuple(functions[name] for name in frame)
            if key not in locations:
                locations[key] = len(locations) + 1
            ids.append(locations[key])
        values = [value // 10_000_000, value]
        if packed:
            sample = _packed(1, ids) + _packed(2, values)
        else:
            sample = b"".join(_field(1, i) for i in ids) + b"".join(_field(2, v) for v in values)
        body += _field(2, sample)
    for key, ident in locations.items():
        body += _field(4, _field(1, ident) + b"".join(_field(4, _field(1, f) + _field(2, 10)) for f in key))
    for name, ident in functions.items():
        body += _field(5, _field(1, ident) + _field(2, strings.index(name)))
    body += b"".join(_field(6, s.encode()) for s in strings)
    body += _field(10, 2_000_000_000) + _field(12, 10_000_000)
    return gzip.compress(body)


STACKS = [
    (["runtime.mallocgc", "encoding/json.(*encodeState).marshal", "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).List",
      "main.serve"], 30),
    (["encoding/json.(*encodeState).string", "encoding/json.(*encodeState).marshal",
      "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).List", "main.serve"], 50),
    (["main.loop", "main.work", "main.loop", "main.serve"], 20),  # recursion counts once
]


@pytest.mark.parametrize("packed", [True, False])
def test_a_written_profile_is_summed_by_function_and_group(packed: bool) -> None:
    decoded = profiles.decode(written_profile(STACKS, packed))
    assert decoded.sample_types == [("samples", "count"), ("cpu", "nanoseconds")]
    assert decoded.duration_nanos == 2_000_000_000 and decoded.period == 10_000_000
    found = profiles.summarise([decoded], "kube-apiserver", "cpu", ["x.pb.gz"], offset_s=1.0, seconds=2.0)
    assert found.total == 100 and found.sample_type == "cpu"
    flat = {f.name: (f.flat_pct, f.cum_pct) for f in found.functions}
    assert flat["encoding/json.(*encodeState).string"] == (50.0, 50.0)
    assert flat["runtime.mallocgc"] == (30.0, 30.0)
    assert flat["main.loop"] == (20.0, 20.0)  # once per sample, however often it recurs
    assert "main.serve" not in flat  # never innermost
    assert [f.name for f in found.functions][:3] == ["encoding/json.(*encodeState).string", "runtime.mallocgc",
                                                     "main.loop"]
    groups = {g.group: (g.flat_pct, g.cum_pct) for g in found.groups}
    # the malloc is GC's; the encoder's own time serialisation's; the cacher's LIST holds both
    assert groups == {"serialisation": (50.0, 80.0), "GC and memory": (30.0, 30.0), "other": (20.0, 20.0)}
    # the same samples in two profiles (consecutive pieces of a window) are summed as pprof merges them
    twice = profiles.summarise([decoded, decoded], "kube-apiserver", "cpu", [], offset_s=0, seconds=4)
    assert twice.total == 200 and twice.groups == found.groups


def test_what_is_no_profile_is_refused_in_words() -> None:
    for data in (b"<html>403 Forbidden</html>", gzip.compress(b"\x0a\x05hello"), b"\x1f\x8bnot gzip"):
        with pytest.raises(profiles.ProfileError):
            profiles.decode(data)


# ----------------------------------------------------------------------------------- results and steps
def step_with(index: int, found: list[ComponentProfile]) -> StepResult:
    return StepResult(index=index, name=f"{10 * (index + 1)} nodes", nodes=10 * (index + 1), pods_per_node=1,
                      started_at="", duration_s=20.0, profiles=found)


def test_profiles_survive_a_results_file_and_older_files_load_without_them(tmp_path: Path) -> None:
    found = summary("kube-apiserver_v1.37.2.cpu", "kube-apiserver", "cpu")
    run = RunResult(run_id="r", plan={}, environment={}, steps=[step_with(0, [found])])
    results.save(run, tmp_path)
    again = results.load(tmp_path)
    assert again.steps[0].profiles == [found]
    assert isinstance(again.steps[0].profiles[0].functions[0], ProfileFunction)
    assert isinstance(again.steps[0].profiles[0].groups[0], ProfileGroup)
    older = results.to_dict(run)
    del older["steps"][0]["profiles"]
    assert results.from_dict(older).steps[0].profiles == []  # not profiled, not zero


def test_group_shares_step_by_step_tell_not_measured_from_none() -> None:
    cpu = summary("kube-apiserver_v1.37.2.cpu", "kube-apiserver", "cpu")
    etcd = summary("etcd_v3.6.16.cpu", "etcd", "cpu")
    run = RunResult(run_id="r", plan={}, environment={}, steps=[step_with(0, [cpu, etcd]), step_with(1, [etcd]),
                                                                 step_with(2, [cpu])])
    assert profiles.profiled_components(run) == ["kube-apiserver", "etcd"]
    rows = {row.group: row for row in profiles.group_changes(run, "kube-apiserver")}
    serialisation = next(g.flat_pct for g in cpu.groups if g.group == "serialisation")
    assert rows["serialisation"].shares == [serialisation, None, serialisation]
    assert rows["serialisation"].change == 0.0
    assert list(rows)[-1] == profiles.OTHER
    etcd_rows = profiles.group_changes(run, "etcd")
    assert all(row.shares[2] is None for row in etcd_rows)
    assert profiles.group_changes(run, "kube-apiserver-2") == []
