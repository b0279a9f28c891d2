"""The noise floor: measured from recorded runs (benchmarks/noise_floor.py and noise.measure), written, read back."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import noise_floor as bench
from loadtests.analysis import noise, stats
from loadtests.analysis.samples import load_side
from loadtests.config.plan import PLANS_DIR
from loadtests.config.plan import load as load_plan
from loadtests.errors import CompareError
from loadtests.results import plan_digest
from tests.unit.noisedata import NOISE_RUNS, recorded_floor
from tests.unit.reportdata import SAMPLE, edited_run, repeated_run


def _post_pods(p99: float, bound: str = "", step: int | None = None):
    def edit(data: dict[str, Any]) -> None:
        for s in data["steps"]:
            if step is not None and s["index"] != step:
                continue
            for entry in s["server"]:
                if entry["verb"] == "POST" and entry["resource"] == "pods":
                    entry.update(p99=p99, bounds={"p99": bound} if bound else {})
    return edit


RISE = (stats.prediction_ratio(NOISE_RUNS) - 1) * 100  # how far above a first run a second may be: +22.9 %


def test_the_floor_is_a_prediction_interval_of_the_runs_at_each_step(tmp_path: Path) -> None:
    floor = recorded_floor(tmp_path / "noise")
    assert floor.plan == "default" and floor.runs == len(NOISE_RUNS)
    post = floor.records["server_mutating: POST pods"]
    # wider than the runs' own highest over lowest (+8 %): a sixth run lands outside five's range one time in three
    assert post.spread_pct == pytest.approx(RISE, abs=0.001) and RISE > 22
    assert post.runs_spread_pct == pytest.approx((1.04 / 0.96 - 1) * 100, abs=0.001)
    assert post.runs == 5 and post.plan == "default" and post.date == "2026-12-01"
    # the largest absolute range is at the largest step: 118.9 ms x (1.04 - 0.96)
    assert post.spread_abs == pytest.approx(0.1189 * 0.08)
    # each step keeps its own: the same relative spread here, as every latency was scaled alike
    steps = floor.steps["server_mutating: POST pods"]
    assert sorted(steps) == [0, 1, 2] and all(r.step_index == i for i, r in steps.items())
    assert "at 100 nodes (99 % prediction from 5 runs of plan default, 2026-12-01, which spread +8 %)" in steps[0].text
    # what the noise runs did not move has no spread: any change past its threshold is beyond it
    assert floor.records["cpu: kube-apiserver"].spread_pct == 0.0
    errors = floor.records["errors: 5xx server errors"]  # 0 in every run: no ratio, a range of 0
    assert errors.spread_pct is None and errors.spread_abs == 0.0 and not errors.allows(0.0, 1.0)
    ceiling = 0.100 * (1 + RISE / 100)
    assert post.allows(0.100, ceiling - 1e-6) and not post.allows(0.100, ceiling + 1e-6)
    assert not floor.records["cpu: kube-apiserver"].allows(20.0, 20.5)


def test_a_step_is_weighed_against_its_own_noise_not_the_widest_step(tmp_path: Path) -> None:
    """Latencies at the 1,000-node step far noisier than at 100 nodes: a change at 100 nodes is weighed against
    100 nodes' spread, and a step the runs left unmeasured against the widest."""
    def noisy_at_the_top(data: dict[str, Any]) -> None:
        factor = data["steps"][2]["pod_startup"]["p99"] / 0.1189  # this run's factor, 0.96 to 1.04
        data["steps"][2]["pod_startup"]["p99"] = 0.1189 * factor ** 50  # 0.13 to 7.1 times
    floor = noise.measure(load_side(repeated_run(tmp_path / "runs", NOISE_RUNS, noisy_at_the_top), "noise"),
                          date="d")
    floors = noise.as_floors(floor)
    key, digest = ("pod_startup", "p99"), floor.plan_digest
    at_100, _ = floors.lookup(key, {"default"}, {digest}, 0)
    at_1000, _ = floors.lookup(key, {"default"}, {digest}, 2)
    assert at_100.spread_pct == pytest.approx(RISE, abs=0.001) and at_1000.spread_pct > 100 * RISE
    assert not at_100.allows(0.040, 0.080) and at_1000.allows(0.040, 0.080)
    unmeasured, _ = floors.lookup(key, {"default"}, {digest}, 7)  # no such step in the noise runs: the widest
    assert unmeasured is floor.records["pod_startup: p99"] and unmeasured.step_index is None


def test_bounds_and_too_few_runs_are_no_measured_spread(tmp_path: Path) -> None:
    # POST pods "< 50 ms" in every run at every step: all the histogram says, not a spread
    runs = repeated_run(tmp_path / "bounded", NOISE_RUNS, _post_pods(0.05, "<"))
    floor = noise.measure(load_side(runs, "noise"), date="2026-12-01")
    assert "server_mutating: POST pods" not in floor.records
    assert floor.unmeasured["server_mutating: POST pods"] == "only a histogram bound in a run at every step"
    record, why = noise.as_floors(floor).lookup(("server_mutating", "POST pods"), {"default"})
    assert record is None and "only a histogram bound" in why
    # a bound at one step only: the other steps' values are the measured spread
    one = repeated_run(tmp_path / "one", NOISE_RUNS, _post_pods(0.05, "<", step=0))
    spread = noise.measure(load_side(one, "noise"), date="d").records["server_mutating: POST pods"]
    assert spread.step in ("500 nodes", "1000 nodes")
    # two runs give no spread (fewer than stats.MIN_SAMPLES)
    two = noise.measure(load_side(repeated_run(tmp_path / "two", (1.0, 1.2)), "noise"), date="d")
    assert two.records == {} and all("fewer than 3 runs" in why for why in two.unmeasured.values())


def test_a_count_from_zero_is_weighed_by_its_range(tmp_path: Path) -> None:
    counts = iter([0, 0, 2, 1, 0])

    def some_5xx(data: dict[str, Any]) -> None:
        data["steps"][0]["requests_by_code"]["503"] = next(counts)

    floor = noise.measure(load_side(repeated_run(tmp_path / "errors", NOISE_RUNS, some_5xx), "noise"), date="d")
    record = floor.records["errors: 5xx server errors"]
    assert record.spread_pct is None and record.spread_abs == 2.0  # a run gave 0: no relative spread
    assert record.allows(0.0, 2.0) and not record.allows(0.0, 3.0)
    assert "2 apart, a run gave 0" in record.text
    step = noise.StepSpread(0, "s", 1, (0.0, 0.0, 2.0))
    assert math.isinf(step.spread_pct) and step.measured


def test_a_plan_uses_its_own_floor_else_the_widest_of_any_plan_saying_so(tmp_path: Path) -> None:
    narrow = recorded_floor(tmp_path / "noise")  # plan default, latencies up to 8 % apart: a floor of +22.9 %
    wide_runs = (0.5, 0.75, 1.0, 1.25, 1.5)  # up to 200 % apart
    wide = replace(recorded_floor(tmp_path / "wide", wide_runs), plan="smoke")
    wide = replace(wide, records={k: replace(r, plan="smoke") for k, r in wide.records.items()})
    floors = noise.as_floors(narrow).with_floor(wide)
    key, digest = ("server_mutating", "POST pods"), narrow.plan_digest
    own, why = floors.lookup(key, {"default"}, {digest})
    assert own is narrow.records["server_mutating: POST pods"] and why == ""
    assert own.allows(0.100, 0.1228) and not own.allows(0.100, 0.1230)
    # a plan never measured: the widest floor of any plan, and it says which and why
    other, why = floors.lookup(key, {"lists"}, {"0123"})
    wide_ceiling = 0.100 * stats.prediction_ratio(wide_runs)
    assert why == "" and other.allows(0.100, wide_ceiling - 1e-6) and not other.allows(0.100, wide_ceiling + 1e-6)
    assert "5 runs of plan smoke" in other.text
    assert other.text.endswith("the widest recorded for any plan (plan lists has no noise floor of its own)")
    # the plan changed since its floor was measured: its digest no longer matches, so it is not its own
    stale, _ = floors.lookup(key, {"default"}, {"fedcba"})
    assert "measured on an earlier version of it" in stale.text and stale.allows(0.100, wide_ceiling - 1e-6)
    assert floors.describe({"default"}, {digest}) == narrow.describe()
    assert floors.describe({"lists"}, {"0123"}).startswith("plan lists has no noise floor of its own: the widest")
    record, why = noise.NoiseFloors().lookup(key, {"default"})
    assert record is None and why.startswith("no noise floor recorded")


def test_the_json_round_trips_and_a_bad_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    floor = recorded_floor(tmp_path / "noise")
    path = tmp_path / "floor.json"
    path.write_text(json.dumps(floor.to_dict()))
    read = noise.load(path).floors["default"]  # a file of one floor, as it was written before floors per plan
    assert read.records == floor.records and read.plan == "default" and read.runs == 5
    assert read.source == str(path) and str(path) in read.describe()
    path.write_text(json.dumps(noise.as_floors(floor).to_dict()))
    monkeypatch.setenv(noise.NOISE_FLOOR_ENV, str(path))
    assert noise.load().floors["default"].records == floor.records
    for text, words in (("not json", "not JSON"), ('{"figures": []}', "a `figures` mapping"),
                        ('{"figures": {"x: y": {"chart": "x"}}}', "not a noise record")):
        path.write_text(text)
        with pytest.raises(CompareError, match=words) as refused:
            noise.load(path)
        assert "\n" not in str(refused.value)
    with pytest.raises(CompareError, match="no such file"):
        noise.load(tmp_path / "nowhere.json")


def test_the_shipped_noise_floor_is_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(noise.NOISE_FLOOR_ENV, raising=False)
    shipped = noise.load()
    assert shipped.source == "loadtests/data/noise_floor.json" and shipped.floors
    for plan, floor in shipped.floors.items():
        assert floor.plan == plan and floor.note and floor.records
        assert all(r.plan == plan and r.runs >= 3 for r in floor.records.values())


def test_every_recorded_floor_is_of_its_plan_as_it_is_now_and_the_default_plan_has_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bundled plan changed since its floor was measured is weighed against the widest floor instead of its own:
    measure it again (benchmarks/noise_floor.py --plan NAME)."""
    monkeypatch.delenv(noise.NOISE_FLOOR_ENV, raising=False)
    shipped = noise.load()
    assert "default" in shipped.floors, "the plan `make load-test` runs has no noise floor"
    for plan, floor in shipped.floors.items():
        digest = plan_digest(load_plan(PLANS_DIR / f"{plan}.yaml").to_dict())
        assert floor.plan_digest == digest, (f"plan {plan} changed since its noise floor was measured: run "
                                             f".venv/bin/python benchmarks/noise_floor.py --plan {plan}")


def _bench(tmp_path: Path, *folders: Path) -> tuple[int, Path, Path, Path]:
    md, js, raw = tmp_path / "out" / "noise_floor.md", tmp_path / "out" / "noise_floor.json", tmp_path / "raw"
    code = bench.main(["--from-results", *map(str, folders), "--out", str(md), "--json", str(js), "--raw", str(raw)])
    return code, md, js, raw


def test_the_benchmark_writes_the_table_the_json_and_the_raw_results(tmp_path: Path) -> None:
    runs = repeated_run(tmp_path / "runs", NOISE_RUNS)
    code, md, js, raw = _bench(tmp_path, runs)
    assert code == 0
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Noise floor: the default plan run 5 times (")
    assert "Command: `.venv/bin/python benchmarks/noise_floor.py --from-results" in text
    assert "| figure | 100 nodes | 500 nodes | 1,000 nodes | widest floor (step) |" in text
    assert "| server p99 POST pods | 41.0 ms (39.4 ms–42.6 ms, +8 %; floor +23 %) |" in text
    floor = noise.load(js).floors["default"]
    assert floor.records["server_mutating: POST pods"].spread_pct == pytest.approx(RISE, abs=0.001)
    assert floor.command.startswith(".venv/bin/python benchmarks/noise_floor.py --from-results")
    assert floor.machine.startswith("8 cores")  # the machine the runs recorded
    files = sorted(raw.glob("*.results.json.gz"))
    assert len(files) == 5
    first = json.loads(gzip.decompress(files[0].read_bytes()))
    assert first["run_id"].endswith("-repeat-1") and first["steps"]


def test_the_benchmark_leaves_out_aborted_runs_and_needs_three(tmp_path: Path) -> None:
    runs = repeated_run(tmp_path / "runs", NOISE_RUNS[:3])
    edited_run(SAMPLE, runs / "repeat-4", lambda data: data.update(status="aborted", error="stopped"))
    code, md, js, raw = _bench(tmp_path, runs)
    assert code == 0
    assert noise.load(js).floors["default"].runs == 3 and len(list(raw.glob("*.gz"))) == 3
    assert "repeat-4: aborted (stopped): left out" in md.read_text(encoding="utf-8")
    code, *_ = _bench(tmp_path / "few", repeated_run(tmp_path / "few-runs", NOISE_RUNS[:2]))
    assert code == 2
