"""The soak's trend rule on synthetic series: a planted growth is judged `grows`, a steady series is not, and how
often the rule says `grows` of a steady series is measured here against the rate docs/soak.md states."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadtests.analysis.soak import (
    ALPHA_ONE_SIDED,
    ETCD_DEFAULT_QUOTA_BYTES,
    FALLS,
    FASTER,
    FLAT,
    GROWS,
    INCONCLUSIVE,
    NOT_MEASURED,
    SAME,
    Trend,
    blocks,
    downsample,
    judge,
    lag1,
    slope_difference,
    trend,
    verdict,
)
from loadtests.config.soak import SETTLE_MAX_S, settings
from loadtests.errors import PlanError
from loadtests.results.soak import SoakMeta, SoakSample

SEEDS = range(300)
SHORT_CORRELATED_RATE = 0.06  # what docs/soak.md states for 30-45 samples of an AR(1) series with phi >= 0.8


def steady(seed: int, n: int, phi: float, level: float = 100.0, sd: float = 1.0) -> list[float]:
    """A steady series: its level plus AR(1) noise of coefficient phi (0: independent samples)."""
    rng = np.random.default_rng(seed)
    out, x = [], 0.0
    for _ in range(n):
        x = phi * x + rng.normal(0, sd)
        out.append(level + x)
    return out


def times(n: int, interval_s: float = 30.0) -> list[float]:
    return [i * interval_s for i in range(n)]


def alarm_rate(n: int, phi: float) -> float:
    judged = [trend("x.goroutines", "count", times(n), steady(seed, n, phi)).verdict for seed in SEEDS]
    return judged.count(GROWS) / len(judged)


@pytest.mark.parametrize(("n", "phi"), [(30, 0.0), (240, 0.0), (240, 0.8)])
def test_steady_series_are_judged_to_grow_at_most_at_the_stated_rate(n: int, phi: float) -> None:
    assert alarm_rate(n, phi) <= ALPHA_ONE_SIDED


@pytest.mark.parametrize(("n", "phi"), [(30, 0.8), (45, 0.9)])
def test_short_correlated_steady_series_stay_within_their_stated_rate(n: int, phi: float) -> None:
    assert alarm_rate(n, phi) <= SHORT_CORRELATED_RATE


def test_a_planted_growth_in_noise_is_judged_to_grow() -> None:
    covered = 0
    for seed in range(40):  # 20 % of the level per hour over 2 h at 30 s, noise 1 % of the level, correlated
        ys = [y + 0.2 * 100 * t / 3600 for y, t in zip(steady(seed, 240, 0.8), times(240), strict=True)]
        found = trend("apiserver.objects", "count", times(240), ys, limit=1000.0)
        assert found.verdict == GROWS
        covered += (found.low_per_h or 0) < 20 < (found.high_per_h or 0)
        assert found.hours_to_limit is not None and 20 < found.hours_to_limit < 60
    assert covered >= 34  # a 95 % interval holds the planted slope about 38 times in 40


def test_a_tiny_significant_slope_on_a_flat_series_is_no_alarm() -> None:
    ys = [100 + 0.1 * t / 3600 + 0.001 * math.sin(t) for t in times(240)]  # 0.1 % per hour, near no noise
    found = trend("etcd.keys", "count", times(240), ys)
    assert found.low_per_h is not None and found.low_per_h > 0  # significant...
    assert found.verdict == FLAT  # ...but below the practical floor


def test_the_rule_reads_the_interval_against_the_floor() -> None:
    assert verdict(1.0, 3.0, 2.0, 1.0) == GROWS
    assert verdict(1.0, 3.0, 0.5, 1.0) == INCONCLUSIVE  # significant, below the floor, interval past it
    assert verdict(-3.0, -1.0, -2.0, 1.0) == FALLS
    assert verdict(-0.5, 0.5, 0.0, 1.0) == FLAT
    assert verdict(-2.0, 2.0, 0.0, 1.0) == INCONCLUSIVE


def test_a_constant_series_is_flat_and_an_unmeasured_one_is_not_measured() -> None:
    assert trend("kwok.open_fds", "count", times(60), [12.0] * 60).verdict == FLAT
    unmeasured = trend("kube-apiserver.watch_cache_capacity", "count", times(60), [None] * 60)
    assert unmeasured.verdict == NOT_MEASURED and unmeasured.samples == 0


def test_too_few_samples_are_inconclusive() -> None:
    assert trend("x.goroutines", "count", times(4), [1.0, 2.0, 3.0, 4.0]).verdict == INCONCLUSIVE


def test_blocks_are_medians_of_at_most_the_cap() -> None:
    ts, ys = blocks(times(240), list(range(240)), most=24)
    assert len(ts) == 24 and ys[0] == 4.5 and ts[0] == 135.0


def test_lag1_reads_independent_and_correlated_noise_apart() -> None:
    assert lag1(steady(1, 2000, 0.0)) < 0.1
    assert 0.7 < lag1(steady(1, 2000, 0.8)) < 0.9
    assert lag1([float(i) for i in range(100)]) == 0.0  # a trend alone is no correlation


def test_what_grew_first_comes_first_and_limits_follow_the_series() -> None:
    n = 120
    ts = times(n)
    noise = steady(7, n, 0.0, level=0.0, sd=2.0)
    late = [(100.0 if t < 1800 else 100.0 + (t - 1800) / 10) + e for t, e in zip(ts, noise, strict=True)]
    early = [50.0 + t / 20 + e for t, e in zip(ts, noise, strict=True)]
    samples = [SoakSample(t, "", {"etcd.db_size_bytes": a, "kube-apiserver.rss_bytes": b, "x.open_fds": 3.0})
               for t, a, b in zip(ts, early, late, strict=True)]
    meta = SoakMeta("r", "s", 3, 1.0, 30.0, memory_limit_bytes=1e6, units={"etcd.db_size_bytes": "count"})
    found = judge(samples, meta)
    assert [t.series for t in found.grown] == ["etcd.db_size_bytes", "kube-apiserver.rss_bytes"]
    by_name = {t.series: t for t in found.trends}
    assert by_name["etcd.db_size_bytes"].limit == ETCD_DEFAULT_QUOTA_BYTES
    assert by_name["kube-apiserver.rss_bytes"].limit == 1e6
    assert by_name["x.open_fds"].verdict == FLAT and not found.passed


def test_the_settling_minutes_are_shown_not_judged() -> None:
    """A process's memory that steps up as the window opens (its probes starting) and stays flat after: over a short
    soak the step reads as growth; judged from after the settling time it is flat."""
    n = 90  # 15 minutes at 10 s
    ts = times(n, 10.0)
    noise = steady(3, n, 0.0, level=0.0, sd=0.2e6)
    rss = [124e6 + 36e6 * min(1.0, t / 60) + e for t, e in zip(ts, noise, strict=True)]
    samples = [SoakSample(t, "", {"harness.rss_bytes": y}) for t, y in zip(ts, rss, strict=True)]
    unsettled = judge(samples, SoakMeta("r", "s", 3, 0.25, 10.0, units={"harness.rss_bytes": "bytes"}))
    settled = judge(samples, SoakMeta("r", "s", 3, 0.25, 10.0, settle_s=90.0, units={"harness.rss_bytes": "bytes"}))
    assert unsettled.trends[0].verdict in (GROWS, INCONCLUSIVE) and unsettled.settle_s == 0.0
    assert settled.trends[0].verdict == FLAT and settled.trends[0].samples == n - 9
    assert settled.hours_measured == unsettled.hours_measured  # the hours held, settling included


def test_a_soak_settles_a_tenth_of_its_length_unless_asked() -> None:
    assert settings(0.5).settle_seconds == 180.0
    assert settings(4.0).settle_seconds == SETTLE_MAX_S
    assert settings(0.5, 10.0, "", 0.0).settle_seconds == 0.0
    with pytest.raises(PlanError, match="less than half of a soak"):
        settings(0.5, 10.0, "", 1000.0)
    with pytest.raises(PlanError, match="0 or more seconds"):
        settings(0.5, 10.0, "", -1.0)


def test_downsampling_keeps_the_shape_and_what_was_not_measured() -> None:
    xs, ys = downsample(list(range(10)), [1.0, 1.0, None, None, 3.0, 3.0, 5.0, 5.0, 7.0, 7.0], 5)
    assert xs == [0.5, 2.5, 4.5, 6.5, 8.5] and ys == [1.0, None, 3.0, 5.0, 7.0]


def judged_series(seed: int, growth_pct_per_h: float) -> Trend:
    ys = [y + growth_pct_per_h * t / 3600 for y, t in zip(steady(seed, 240, 0.5), times(240), strict=True)]
    return trend("kube-apiserver.goroutines", "count", times(240), ys)


def test_two_soaks_whose_slopes_differ_are_told_apart() -> None:
    for seed in range(20):  # A flat, B growing 20 % of the level an hour
        found = slope_difference(judged_series(seed, 0.0), judged_series(seed + 1000, 20.0))
        assert found.verdict == FASTER, found
        assert found.low_per_h is not None and found.low_per_h > 0


def test_two_soaks_of_the_same_slope_are_never_told_apart_more_than_stated() -> None:
    found = [slope_difference(judged_series(seed, 10.0), judged_series(seed + 1000, 10.0)).verdict
             for seed in SEEDS]
    assert found.count(FASTER) / len(found) <= ALPHA_ONE_SIDED
    assert found.count(SAME) > len(found) / 2  # and most are said to be the same


def test_a_cpu_share_or_memory_creeping_below_its_absolute_floor_is_no_alarm() -> None:
    cpu = [2.5 + 0.5 * t / 3600 + 0.01 * math.sin(t) for t in times(240)]  # 20 % of its level, 0.5 % of a core an hour
    assert trend("harness.cpu_pct", "%", times(240), cpu).verdict == FLAT
    rss = [1e7 + 2**19 * t / 3600 + 1e3 * math.sin(t) for t in times(240)]  # half a MiB an hour
    assert trend("harness.rss_bytes", "bytes", times(240), rss).verdict == FLAT
