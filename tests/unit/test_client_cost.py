"""benchmarks/client_cost.py's table, from a small recorded raw file (rows of a real measurement, kept as they were
written): each side's median per unit of work, the ratio harness / client-go with its range over the pairs, and the
summary of a py-spy profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import client_cost

DATA = Path(__file__).parent / "data" / "client_cost_rows.json.gz"


@pytest.fixture()
def rows() -> list[client_cost.Row]:
    return client_cost.from_raw(DATA)[1]


def cells(lines: list[str], work: str, figure: str) -> list[str]:
    line = next(line for line in lines if line.startswith(f"| {work} | {figure} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_each_side_per_unit_and_the_ratio_over_the_pairs(rows: list[client_cost.Row]) -> None:
    lines = client_cost.table(rows)
    go, load = client_cost.pairs_of(rows, "create")[0]
    per_go = go["client_cpu_s"] * 1000 / go["units"]
    per_load = load["client_cpu_s"] * 1000 / load["units"]
    ratios = sorted(h["client_cpu_s"] / h["units"] / (g["client_cpu_s"] / g["units"])
                    for g, h in client_cost.pairs_of(rows, "create"))
    row = cells(lines, "create", "client CPU per unit")
    assert len(client_cost.pairs_of(rows, "create")) == 2
    assert row[4] == f"{(ratios[0] + ratios[1]) / 2:.2f}x ({ratios[0]:.2f}-{ratios[1]:.2f})"
    assert row[5] == "2"
    assert per_go > 0 and per_load > 0


def test_bytes_only_where_the_work_has_them(rows: list[client_cost.Row]) -> None:
    lines = client_cost.table(rows)
    assert not any(line.startswith("| create | LIST response bytes") for line in lines)
    go, load = client_cost.pairs_of(rows, "list")[0]
    listed = cells(lines, "list", "LIST response bytes per LIST")
    assert listed[2].endswith(" B") and listed[3].endswith(" B")
    assert float(listed[2].removesuffix(" B").replace(",", "")) > 0


def test_a_profile_summary_counts_own_and_total_time() -> None:
    stacks = ("main (a.py:1);send (b.py:10);encode (c.py:5) 6\n"
              "main (a.py:1);send (b.py:12) 3\n"
              "main (a.py:2);stats (d.py:7) 1\n")
    top = {name: (own, total) for name, own, total in client_cost.profile_top(stacks)}
    assert top["encode (c.py)"] == (0.6, 0.6)
    assert top["send (b.py)"] == (0.3, 0.9)  # lines of one function are one function
    assert top["main (a.py)"] == (0.0, 1.0)


def test_what_the_cuts_took_is_the_share_of_stacks_through_them() -> None:
    stacks = ("run (a.py:1);_keep_window (l.py:3);exists (g.py:1) 2\n"
              "run (a.py:1);send (b.py:10) 7\n"
              "run (a.py:1);CookieJar.add_cookie_header (c.py:9) 1\n")
    assert client_cost.total_share(stacks, client_cost.CUT_FUNCTIONS) == 0.3
    assert client_cost.total_share("", client_cost.CUT_FUNCTIONS) == 0.0
