"""The plain-text parser the probes read pages with gives what prometheus_client's parser gives, sample for
sample, on every page recorded here; a page's families are selected as a line-by-line filter selects them; and
a step recorded before either existed keeps every server figure."""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path

import pytest

from loadtests import results
from loadtests.analysis.metrics import parsed_samples, plain_samples, select_families
from loadtests.analysis.scrapes import recompute
from loadtests.measure.component_metrics import SOURCE_FIGURES, _families

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "recorded_default_1000"  # the default plan's 1,000-node step, its results written before
PAGES = sorted(p for p in DATA.rglob("*") if p.name.endswith((".prom.gz", "_start.txt", "_end.txt")))


def _text(path: Path) -> str:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()


def _same(fast: dict, reference: dict) -> bool:
    return fast.keys() == reference.keys() and all(
        fast[key] == reference[key] or (math.isnan(fast[key]) and math.isnan(reference[key])) for key in fast)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_recorded_page_parses_to_the_reference_samples(path: Path) -> None:
    text = _text(path)
    fast = plain_samples(text)
    assert fast is not None, "a page a Go component wrote is plain text"
    assert _same(fast, parsed_samples(text))


def _lines_of(text: str, families: set[str]) -> str:
    """The reference selection: every line, kept by the metric name it names."""
    wanted = {family + suffix for family in families
              for suffix in ("", "_bucket", "_sum", "_count", "_total", "_created")}
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE") and parts[2] in wanted:
                kept.append(line)
        elif line.split("{", 1)[0].strip().split(" ", 1)[0] in wanted:
            kept.append(line)
    return "\n".join(kept) + "\n"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_recorded_page_gives_each_source_the_lines_of_its_families(path: Path) -> None:
    text = _text(path)
    for source in SOURCE_FIGURES:
        families = set(_families(source))
        assert select_families(text, families) == _lines_of(text, families), source


def test_a_family_is_its_lines_from_its_help_or_type_to_the_next_family() -> None:
    text = ("# HELP a\n# TYPE a counter\na_total 1\n# TYPE b gauge\nb 2\nstray 3\n"
            "# HELP c the c\n# TYPE c histogram\nc_bucket{le=\"+Inf\"} 1\nc_count 1\nc_sum 0.5\n")
    assert select_families(text, {"a", "c"}) == ("# HELP a\n# TYPE a counter\na_total 1\n# HELP c the c\n"
                                                 "# TYPE c histogram\nc_bucket{le=\"+Inf\"} 1\nc_count 1\n"
                                                 "c_sum 0.5\n")
    assert select_families(text, {"b"}) == "# TYPE b gauge\nb 2\n"  # a stray sample after b is not b's
    # samples no HELP or TYPE covers are looked for alone, in the page's order, each once
    assert select_families(text, {"stray", "st"}) == "stray 3\n"
    assert select_families("x 1\nst 2\nstray{a=\"1\"} 3\n# TYPE b gauge\nb 4\n", {"st", "stray", "b"}) == (
        "st 2\nstray{a=\"1\"} 3\n# TYPE b gauge\nb 4\n")
    assert select_families("# TYPE b gauge\nb 4\nst 5", {"st", "b"}) == "# TYPE b gauge\nb 4\nst 5\n"


def test_there_are_pages_of_every_component() -> None:
    names = " ".join(p.name for p in PAGES)
    for component in ("apiserver", "etcd", "kube-scheduler", "kube-controller-manager"):
        assert component in names


@pytest.mark.parametrize("line, why", [
    ('# HELP "quoted.name" a UTF-8 name', "quoted metric name"),
    ('foo{__name__="bar"} 1', "a reserved label"),
    ('foo{a="1",a="2"} 1', "a repeated label"),
    ('foo 1 # {trace_id="x"} 2', "an exemplar"),
    ("foo 1_000", "a value with an underscore"),
])
def test_what_is_not_plain_is_left_to_the_reference_parser(line: str, why: str) -> None:
    assert plain_samples(f"# TYPE foo gauge\n{line}\n") is None, why


def test_counters_and_strays_are_named_as_the_reference_names_them() -> None:
    text = ("# TYPE old_counter counter\nold_counter{a=\"x\\\"y\\\\z\\n\"} 3\nold_counter_created 5\n"
            "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.5\nh_count 2\nstray 7 1700000000\n")
    fast = plain_samples(text)
    assert fast is not None and _same(fast, parsed_samples(text))
    assert ("old_counter_total", frozenset({("a", 'x"y\\z\n')})) in fast and ("stray", frozenset()) in fast


def test_a_recorded_step_keeps_every_server_figure() -> None:
    """Its figures, recorded with prometheus_client's parser, computed again from its kept pages now."""
    recorded = results.from_dict(json.loads(gzip.decompress((RECORDED / "results.json.gz").read_bytes())))
    [step] = recorded.steps
    again = copy.deepcopy(step)
    assert recompute(again, RECORDED / "step-1") == []
    before, after = results.to_dict(recorded)["steps"][0], results.to_dict(
        results.RunResult(**{**recorded.__dict__, "steps": [again]}))["steps"][0]
    for section in ("server", "requests_by_code", "apiserver", "storage_objects", "etcd"):
        assert after[section] == before[section], section
    assert len(before["server"]) > 20 and before["apiserver"] and before["etcd"]
