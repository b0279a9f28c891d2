"""Is the harness the bottleneck? Its own process judged as the load generator is, where the run records it
(the step's notes, a saturated ramp's evidence) and where the report shows it (the Processes table, the CPU
chart); older results without the harness row still load and render."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from loadtests.analysis import figures
from loadtests.kube.rest import RestClient
from loadtests.measure import probes as probes_module
from loadtests.measure.probes import StepProbes
from loadtests.measure.processes import HARNESS, ProcessSampler, harness_note
from loadtests.measure.saturation import RampWitness
from loadtests.report import charts
from loadtests.report.html import write_report
from loadtests.results import load
from loadtests.results.processes import CPU_BOUND_PERCENT, ProcessStat
from tests.unit.reportdata import SAMPLE, copy_run, edited_run
from tests.unit.test_measure_probes import step, unreachable_target


def stat(component: str, cpu_percent: float, pids: int = 1) -> ProcessStat:
    return ProcessStat(component=component, cpu_percent=cpu_percent, cpu_seconds=cpu_percent * 0.6,
                       rss_max_bytes=2**26, rss_end_bytes=2**26, pids=list(range(100, 100 + pids)))


# ---- the step's note ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("harness", "shown"), [(CPU_BOUND_PERCENT, "90 %"), (97.4, "97 %"), (131.0, "131 %")])
def test_the_harness_at_its_limit_is_named_with_its_figure(harness: float, shown: str) -> None:
    note = harness_note([stat("kube-apiserver", 60.0), stat(HARNESS, harness)])
    assert note is not None
    assert note.startswith(f"harness at its CPU limit: {shown} of one core over the step")
    assert "cpu-bound" not in note.lower()  # the report's own load generator check keys on that word


@pytest.mark.parametrize("processes", [
    [stat(HARNESS, CPU_BOUND_PERCENT - 0.5)],  # just below the limit
    [stat("loadgen", 185.0, pids=2), stat(HARNESS, 40.0)],  # a busy load generator is not the harness
    [stat("loadgen", 99.0)],  # an older step without the harness row: nothing said about it
    [],
])
def test_the_harness_below_its_limit_or_not_recorded_is_not_named(processes: list[ProcessStat]) -> None:
    assert harness_note(processes) is None


def test_the_gathered_step_carries_the_note_and_the_machine_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    class Recorded(ProcessSampler):
        """The real sampler's interval, with the harness's figure as a busy step recorded it."""

        def gather(self) -> list[ProcessStat]:
            super().gather()
            self.machine_cpu_percent, self.machine_cpu_seconds = 150.0, 90.0
            return [stat(HARNESS, 96.0)]

    monkeypatch.setattr(probes_module, "ProcessSampler", Recorded)
    probes = StepProbes(unreachable_target({HARNESS: [os.getpid()]}), "probe-ns", "churn-ns",
                        process_interval_s=0.05)
    probes.start()
    result = probes.gather(step())
    assert [n for n in result.notes if n.startswith("harness at its CPU limit: 96 % of one core")]
    assert (result.machine_cpu_percent, result.machine_cpu_seconds) == (150.0, 90.0)


# ---- a saturated ramp's evidence --------------------------------------------------------------------------


@pytest.fixture
def witness() -> Any:
    info = unreachable_target({})
    client = RestClient(info.access, pool_size=1)
    found = RampWitness(info, client)
    yield found
    client.close()


def test_the_ramp_witness_samples_the_harness(witness: RampWitness) -> None:
    assert "cpu.harness" in witness.cpu.read()  # this process, beside the target's components


@pytest.mark.parametrize(("harness", "named"), [(98.0, True), (CPU_BOUND_PERCENT, True), (55.0, False)])
def test_the_ramp_evidence_names_the_harness_at_its_limit(witness: RampWitness, monkeypatch: pytest.MonkeyPatch,
                                                          harness: float, named: bool) -> None:
    recorded = {"cpu.machine": 180.0, "cpu.iowait": 1.0, "cpu.kwok": 60.0, "cpu.harness": harness}
    monkeypatch.setattr(witness.cpu, "read", lambda: dict(recorded))
    evidence = witness.evidence()
    assert "the API did not answer" in evidence
    assert f"harness {harness:.0f}" in evidence  # in the CPU list either way
    assert ("harness at its CPU limit" in evidence) is named
    if named:
        assert f"{harness:.0f} % of one core over the ramp" in evidence


# ---- the report ---------------------------------------------------------------------------------------------


def process_tables(html: str) -> list[list[str]]:
    """Each step's Processes table, as its rows' HTML."""
    tables = [part.split("</table>")[0] for part in html.split("<h3>Processes</h3>")[1:]]
    return [re.findall(r"<tr[^>]*>.*?</tr>", t.split("<tbody>")[1], flags=re.DOTALL) for t in tables]


def cells(row: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", row)


def with_harness(data: dict[str, Any]) -> None:
    """Steps 0 and 2 as a run that records the harness and the machine: step 2 as the 1,000-node step of the
    issue (the components 108 % of a core, the machine 113 %), step 0 with the harness at its limit."""
    rows = {"etcd": 10.0, "kube-apiserver": 40.0, "kwok": 30.0, "loadgen": 28.0}
    for index, harness, machine in ((0, 95.0, 220.0), (2, 3.5, 113.0)):
        entry = data["steps"][index]
        entry["notes"] = []
        entry["processes"] = [{"component": c, "cpu_percent": v, "cpu_seconds": v * 0.6, "rss_max_bytes": 2**26,
                               "rss_end_bytes": 2**26, "pids": [4100 + i]} for i, (c, v) in enumerate(rows.items())]
        entry["processes"].append({"component": HARNESS, "cpu_percent": harness, "cpu_seconds": harness * 0.6,
                                   "rss_max_bytes": 2**27, "rss_end_bytes": 2**27, "pids": [4000]})
        entry["machine_cpu_percent"], entry["machine_cpu_seconds"] = machine, machine * 0.6


def test_an_older_results_file_without_the_harness_renders_as_before(tmp_path: Path) -> None:
    folder = copy_run(SAMPLE, tmp_path / "run")
    run = load(folder)
    assert all(s.machine_cpu_percent is None and s.machine_cpu_seconds is None for s in run.steps)
    assert not any(p.component == HARNESS for s in run.steps for p in s.processes)
    tables = process_tables(write_report(folder).read_text(encoding="utf-8"))
    assert len(tables) == len(run.steps)
    for rows, recorded in zip(tables, run.steps, strict=True):
        assert [cells(r)[0] for r in rows] == [p.component for p in recorded.processes]  # no machine, no other


def test_the_harness_row_and_what_no_row_covers(tmp_path: Path) -> None:
    html = write_report(edited_run(SAMPLE, tmp_path / "run", with_harness)).read_text(encoding="utf-8")
    busy, middle, issue = process_tables(html)
    assert [cells(r)[0] for r in issue] == ["etcd", "kube-apiserver", "kwok", "loadgen", HARNESS,
                                           "other processes", "this machine"]
    harness = next(r for r in issue if cells(r)[0] == HARNESS)
    assert cells(harness)[1] == "3.5 %" and 'class="warn"' not in harness
    other, machine = issue[-2:]
    assert cells(other)[1:3] == ["1.5 %", "900.0 ms"]  # 113 - (108 + 3.5) % of a core; 67.8 - 66.9 s
    assert cells(machine)[1:3] == ["113.0 %", "67.80 s"]
    # at its limit the harness row is marked as a busy load generator is
    assert next(r for r in busy if cells(r)[0] == HARNESS).startswith('<tr class="warn">')
    assert cells(busy[-2])[1] == "17.0 %"  # 220 - (108 + 95)
    assert "other processes" not in "".join(middle)  # a step without the machine figure shows no such row


def test_the_cpu_chart_adds_the_harness_and_keeps_the_components_colours(tmp_path: Path) -> None:
    def cpu_colours(folder: Path) -> dict[str, str]:
        names = [s.name for s in figures.series(load(folder)) if s.chart == "cpu"]
        return charts.colours(names)

    before = cpu_colours(copy_run(SAMPLE, tmp_path / "old"))
    after = cpu_colours(edited_run(SAMPLE, tmp_path / "new", with_harness))
    assert list(after)[-1] == HARNESS and HARNESS not in before
    assert {name: after[name] for name in before} == before
    assert after[HARNESS] not in before.values()
