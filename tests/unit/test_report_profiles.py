"""The report's "Where the CPU went": per step the top functions and groups of kube-apiserver's and etcd's CPU
profiles and their heap in use, then the groups step by step; rebuilt from results alone (a smoke run's, recorded
in data/results_profiles with its profiles' summaries)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from loadtests import results
from loadtests.report.html import write_report
from loadtests.report.profiles import TOP_ROWS, change_tables, short_name, step_profiles
from tests.unit.reportdata import DATA, SAMPLE, copy_run, edited_run

PROFILED = DATA / "results_profiles"  # `loadtest run --plan smoke`: 10 and 20 nodes, 20 s windows


def section(html: str, start: str, end: str) -> str:
    begin = html.index(start)
    return html[begin:html.index(end, begin)]


def cells(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", html, flags=re.S)]


@pytest.fixture(scope="module")
def profiled_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_report(copy_run(PROFILED, tmp_path_factory.mktemp("profiled"))).read_text()


def test_each_step_says_where_the_cpu_went(profiled_html: str) -> None:
    run = results.load(PROFILED)
    for step in run.steps:
        part = section(profiled_html, f'id="profiles-{step.index}"', "</section>")
        apiserver = next(p for p in step.profiles if p.component == "kube-apiserver" and p.kind == "cpu")
        # the top functions by flat share, short names with the full one beside
        top = apiserver.functions[0]
        assert f'title="{top.name}"' in part and short_name(top.name) in part
        tables = part.split('class="profile-functions"')
        assert len(tables) == 1 + 4  # apiserver and etcd CPU, then both heaps
        first = tables[1].split("</table>")[0]
        assert first.count("<tr><td") == TOP_ROWS
        assert f"{top.flat_pct:.1f} %" in cells(first)[:3]
        # the groups, every group with a share; they add up to the whole profile
        groups = section(part, 'class="profile-groups"', "</table>")
        assert "serialisation" in groups and "GC and memory" in groups
        shares = [float(c.rstrip(" %")) for c in cells(groups)[1::3]]
        assert sum(shares) == pytest.approx(100, abs=0.5)
        # where it came from: seconds of the window, % of a core beside psutil's, the raw file
        assert "step-" + str(step.index + 1) + "/profiles/kube-apiserver.cpu.pb.gz" in part
        assert "of a core; psutil over the whole window" in part
        assert "Heap in use at the window&#39;s close" in part or "Heap in use at the window's close" in part
        assert "go tool pprof -top" in part


def test_the_groups_are_side_by_side_step_by_step(profiled_html: str) -> None:
    part = section(profiled_html, 'id="profile-changes"', 'id="projection"')
    assert part.count('class="profile-changes"') == 2  # kube-apiserver, then etcd
    header = re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", part.split("</thead>")[0])
    assert header == ["group", "10 nodes", "20 nodes", "change"]
    first = cells(part)[:4]
    assert first[0].startswith("on a CPU, % of a core") and first[1].endswith("%") and first[2].endswith("%")


def drop_etcd_of_the_second_step(data: dict[str, Any]) -> None:
    data["steps"][1]["profiles"] = [p for p in data["steps"][1]["profiles"] if p["component"] != "etcd"]


def test_a_step_not_profiled_is_not_measured_not_zero(tmp_path: Path) -> None:
    folder = edited_run(PROFILED, tmp_path / "run", drop_etcd_of_the_second_step)
    run = results.load(folder)
    etcd = next(t for t in change_tables(run) if t.component == "etcd")
    assert all(shares[1] == "—" and change == "—" for _, shares, change in etcd.rows)
    apiserver = next(t for t in change_tables(run) if t.component == "kube-apiserver")
    assert all(shares[1] != "—" for _, shares, _ in apiserver.rows)
    view = step_profiles(run.steps[1])
    assert view is not None and [t.component for t in view.cpu] == ["kube-apiserver"]


def test_a_run_without_profiles_says_it_was_not_profiled(tmp_path: Path) -> None:
    html = write_report(copy_run(SAMPLE, tmp_path / "sample")).read_text()
    assert html.count("Where the CPU went</h3>") == len(results.load(SAMPLE).steps)
    assert "Not profiled: profiling is off in the plan" in html
    assert 'id="profile-changes"' not in html
    assert step_profiles(results.load(SAMPLE).steps[0]) is None
