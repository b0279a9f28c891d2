"""Histogram and counter maths over two scrapes, checked against values worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loadtests.analysis.metrics import (
    Histogram,
    Snapshot,
    counter_delta,
    counter_delta_by,
    histogram_delta,
    histogram_deltas,
    histogram_quantile,
    histograms,
    labels_of,
)

DATA = Path(__file__).parent / "data"
INF = math.inf


def hist_text(name: str, buckets: dict[str, float], labels: str = "", total: float = 0.0) -> str:
    """A histogram family as client_golang prints it (labels: 'a="x",b="y"' without braces)."""
    prefix = f"{labels}," if labels else ""
    lines = [f"# HELP {name} test histogram", f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{prefix}le="{le}"}} {count}' for le, count in buckets.items()]
    braces = f"{{{labels}}}" if labels else ""
    lines += [f"{name}_sum{braces} {total}", f"{name}_count{braces} {buckets['+Inf']}"]
    return "\n".join(lines) + "\n"


class TestHistogramQuantile:
    def test_interpolates_linearly_inside_the_bucket(self) -> None:
        # 100 observations: 50 <= 0.1, 30 in (0.1, 0.5], 20 in (0.5, 1]
        buckets = [(0.1, 50.0), (0.5, 80.0), (1.0, 100.0), (INF, 100.0)]
        assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)  # rank 50 ends the first bucket
        assert histogram_quantile(0.25, buckets) == pytest.approx(0.05)  # 0 + 0.1 * 25/50
        assert histogram_quantile(0.65, buckets) == pytest.approx(0.3)  # 0.1 + 0.4 * 15/30
        assert histogram_quantile(0.9, buckets) == pytest.approx(0.75)  # 0.5 + 0.5 * 10/20
        assert histogram_quantile(0.99, buckets) == pytest.approx(0.975)  # 0.5 + 0.5 * 19/20

    def test_rank_in_the_inf_bucket_gives_the_highest_finite_bound(self) -> None:
        buckets = [(1.0, 5.0), (10.0, 8.0), (INF, 10.0)]
        assert histogram_quantile(0.9, buckets) == 10.0
        assert histogram_quantile(0.99, buckets) == 10.0
        assert histogram_quantile(0.5, buckets) == pytest.approx(1.0)  # rank 5: the end of the first bucket

    def test_empty_or_unusable_histograms_give_none(self) -> None:
        assert histogram_quantile(0.99, [(0.1, 0.0), (INF, 0.0)]) is None
        assert histogram_quantile(0.99, []) is None
        assert histogram_quantile(0.99, [(INF, 4.0)]) is None  # fewer than two buckets
        assert histogram_quantile(0.99, [(0.1, 1.0), (1.0, 4.0)]) is None  # no +Inf bucket

    def test_out_of_range_quantiles_follow_prometheus(self) -> None:
        buckets = [(1.0, 1.0), (INF, 1.0)]
        assert histogram_quantile(-0.1, buckets) == -INF
        assert histogram_quantile(1.1, buckets) == INF
        assert histogram_quantile(float("nan"), buckets) is None

    def test_unsorted_and_non_monotonic_buckets_are_repaired(self) -> None:
        # the 0.5 bucket dipped below the 0.1 bucket: Prometheus treats it as equal to it
        buckets = [(INF, 100.0), (1.0, 100.0), (0.5, 40.0), (0.1, 50.0)]
        assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
        assert histogram_quantile(0.75, buckets) == pytest.approx(0.5 + 0.5 * 25 / 50)

    def test_first_bucket_with_non_positive_bound_returns_that_bound(self) -> None:
        assert histogram_quantile(0.1, [(0.0, 5.0), (1.0, 10.0), (INF, 10.0)]) == 0.0


class TestHistogramDelta:
    def test_delta_subtracts_bucket_by_bucket(self) -> None:
        start = Histogram(((0.1, 10.0), (0.5, 20.0), (INF, 20.0)), sum=3.0)
        end = Histogram(((0.1, 60.0), (0.5, 100.0), (INF, 120.0)), sum=40.0)
        delta = end.minus(start)
        assert delta.buckets == ((0.1, 50.0), (0.5, 80.0), (INF, 100.0))
        assert delta.count == 100.0
        assert delta.sum == pytest.approx(37.0)
        # 50 <= 0.1, 30 in (0.1, 0.5], 20 above 0.5: p90 lands in +Inf
        assert delta.bounded_quantile(0.5).value == pytest.approx(0.1)
        assert delta.bounded_quantile(0.7).value == pytest.approx(0.1 + 0.4 * 20 / 30)
        assert delta.bounded_quantile(0.9).value == 0.5

    def test_counter_reset_takes_the_end_as_the_delta(self) -> None:
        start = Histogram(((0.1, 500.0), (0.5, 900.0), (INF, 1000.0)))
        end = Histogram(((0.1, 8.0), (0.5, 10.0), (INF, 10.0)))  # the process restarted during the step
        assert end.minus(start) == end
        assert end.minus(start).bounded_quantile(0.5).value == pytest.approx(0.1 * 5 / 8)

    def test_no_new_observations_give_an_empty_delta_and_no_quantile(self) -> None:
        same = Histogram(((0.1, 7.0), (INF, 9.0)))
        delta = same.minus(same)
        assert delta.count == 0
        assert delta.bounded_quantile(0.99).value is None

    def test_deltas_from_snapshots_are_per_series_then_grouped(self) -> None:
        name = "demo_duration_seconds"
        start = Snapshot.parse(hist_text(name, {"0.1": 10, "1": 10, "+Inf": 10}, 'verb="GET",version="v1"')
                               + hist_text(name, {"0.1": 100, "1": 100, "+Inf": 100}, 'verb="GET",version="v2"')
                               .split("\n", 2)[2])
        end = Snapshot.parse(hist_text(name, {"0.1": 30, "1": 40, "+Inf": 40}, 'verb="GET",version="v1"')
                             # v2 restarted: its end values are all new
                             + hist_text(name, {"0.1": 5, "1": 10, "+Inf": 10}, 'verb="GET",version="v2"')
                             .split("\n", 2)[2])
        grouped = histogram_deltas(start, end, name, ("verb",))
        assert list(grouped) == [labels_of({"verb": "GET"})]
        merged = grouped[labels_of({"verb": "GET"})]
        assert merged.buckets == ((0.1, 25.0), (1.0, 40.0), (INF, 40.0))  # v1: 20+10, v2: 5+10
        assert merged.bounded_quantile(0.5).value == pytest.approx(0.1 * 20 / 25)
        per_series = histogram_deltas(start, end, name)
        assert len(per_series) == 2
        assert histogram_delta(start, end, name, version="v1").count == 30
        assert histogram_delta(start, end, "absent_seconds") is None

    def test_series_that_appear_during_the_step_count_from_zero(self) -> None:
        name = "demo_duration_seconds"
        end = Snapshot.parse(hist_text(name, {"0.5": 3, "+Inf": 4}, 'verb="POST"'))
        delta = histogram_delta(Snapshot({}), end, name)
        assert delta is not None and delta.count == 4
        assert delta.bounded_quantile(0.5).value == pytest.approx(0.5 * 2 / 3)


class TestCounters:
    TEXT = """# HELP requests_total Requests.
# TYPE requests_total counter
requests_total{code="200",verb="GET"} {a}
requests_total{code="200",verb="LIST"} {b}
requests_total{code="500",verb="GET"} {c}
"""

    def snap(self, a: float, b: float, c: float) -> Snapshot:
        return Snapshot.parse(self.TEXT.replace("{a}", str(a)).replace("{b}", str(b)).replace("{c}", str(c)))

    def test_delta_sums_per_series_increases(self) -> None:
        start, end = self.snap(10, 5, 1), self.snap(15, 25, 4)
        assert counter_delta(start, end, "requests_total") == 28
        assert counter_delta(start, end, "requests_total", verb="GET") == 8
        assert counter_delta_by(start, end, "requests_total", "code") == {"200": 25, "500": 3}

    def test_a_series_that_went_down_restarted(self) -> None:
        start, end = self.snap(1000, 5, 1), self.snap(7, 6, 1)
        assert counter_delta(start, end, "requests_total", verb="GET", code="200") == 7
        assert counter_delta(start, end, "requests_total") == 8

    def test_absent_metric_is_none_not_zero(self) -> None:
        assert counter_delta(self.snap(1, 1, 1), self.snap(1, 1, 1), "nothing_total") is None
        assert counter_delta(self.snap(1, 1, 1), self.snap(1, 1, 1), "requests_total") == 0

    def test_predicate_matchers_and_missing_labels(self) -> None:
        end = self.snap(1, 2, 3)
        assert end.total("requests_total", code=lambda c: c.startswith("5")) == 3
        assert end.total("requests_total", subresource="") == 6  # a label that is absent equals ""
        assert end.total("requests_total", verb="WATCH") is None


class TestRecordedText:
    def test_parses_recorded_apiserver_metrics(self) -> None:
        snap = Snapshot.parse((DATA / "apiserver_metrics_end.txt").read_text())
        assert snap.has("apiserver_request_total")
        assert snap.has("apiserver_request_sli_duration_seconds_bucket")
        # counters keep the _total name they are exposed with; large values arrive in exponent form
        leases = snap.total("apiserver_request_total", verb="GET", resource="leases", code="200")
        assert leases == 1235067
        assert snap.total("process_resident_memory_bytes") == 456781824
        sli = histograms(snap, "apiserver_request_sli_duration_seconds", ("verb", "resource", "subresource"),
                         verb="POST", resource="pods")
        (histogram,) = sli.values()
        assert histogram.count == 212
        assert histogram.buckets[-1] == (INF, 212.0)
        assert len(histogram.buckets) == 22  # 21 bounds from 0.05 to 60, and +Inf

    def test_parses_recorded_etcd_metrics(self) -> None:
        snap = Snapshot.parse((DATA / "etcd_metrics_end.txt").read_text())
        # a gauge whose name ends in _total keeps its name
        assert snap.total("etcd_debugging_mvcc_keys_total") == 2345
        assert snap.total("etcd_server_quota_backend_bytes") == 2 * 1024**3
        (fsync,) = histograms(snap, "etcd_disk_wal_fsync_duration_seconds").values()
        assert [bound for bound, _ in fsync.buckets][:3] == [0.001, 0.002, 0.004]
        assert fsync.count == 1500


class TestSelectFamilies:
    TEXT = """# HELP wanted_total A counter.
# TYPE wanted_total counter
wanted_total{code="200"} 5
# HELP wanted_seconds A histogram.
# TYPE wanted_seconds histogram
wanted_seconds_bucket{le="1"} 1
wanted_seconds_bucket{le="+Inf"} 2
wanted_seconds_sum 1.5
wanted_seconds_count 2
# HELP other_seconds Not wanted.
# TYPE other_seconds histogram
other_seconds_bucket{le="+Inf"} 9
other_seconds_sum 9
other_seconds_count 9
wanted_seconds_extra 1
untyped_sample 3
"""

    def test_keeps_the_named_families_whole_and_nothing_else(self) -> None:
        snap = Snapshot.parse(self.TEXT, families={"wanted_total", "wanted_seconds", "untyped_sample"})
        names = {name for name, _ in snap}
        assert names == {"wanted_total", "wanted_seconds_bucket", "wanted_seconds_sum", "wanted_seconds_count",
                         "untyped_sample"}
        assert histogram_delta(None, snap, "wanted_seconds").count == 2

    def test_recorded_page_parses_the_same_either_way(self) -> None:
        text = (DATA / "apiserver_metrics_end.txt").read_text()
        full = Snapshot.parse(text)
        only = Snapshot.parse(text, families={"apiserver_request_total"})
        assert dict(only) == {key: value for key, value in full.items() if key[0] == "apiserver_request_total"}


@pytest.mark.parametrize("families", [None, ("apiserver_request_total", "apiserver_request_duration_seconds")])
def test_a_deferred_page_reads_as_the_parsed_one_and_parses_only_when_read(families: tuple[str, ...] | None
                                                                           ) -> None:
    """The page that opens a window, parsed after it closes (Snapshot.deferred): the same samples, index and
    time; a page that cannot be parsed says so when it is read, not when it came."""
    text = (DATA / "apiserver_metrics_start.txt").read_text()
    parsed, deferred = Snapshot.parse(text, 12.5, families), Snapshot.deferred(text, 12.5, families)
    assert deferred.taken_at == parsed.taken_at == 12.5 and deferred.text == text
    assert dict(deferred) == dict(parsed) and len(deferred) == len(parsed) > 0
    assert deferred.total("apiserver_request_total", verb="POST") == parsed.total("apiserver_request_total",
                                                                                  verb="POST")
    broken = Snapshot.deferred("not_a_sample{ 1\n", 1.0)  # nothing parsed yet: no error
    with pytest.raises(ValueError):
        len(broken)
