"""etcd figures from recorded etcd /metrics, and the apiserver fallback."""

from __future__ import annotations

import pytest

from loadtests.analysis import etcd
from loadtests.analysis.metrics import Snapshot
from tests.checks import recorded


def test_stats_over_a_step() -> None:
    stats = etcd.etcd_stats(recorded("etcd_metrics_start.txt"), recorded("etcd_metrics_end.txt"))
    assert stats.db_size_bytes == 52035584
    assert stats.db_size_in_use_bytes == 31457280
    assert stats.keys_total == 2345
    assert stats.quota_bytes == 2147483648
    # fsync delta: 600 <= 2ms, 300 in (2, 4], 80 in (4, 8], 20 in (8, 16]: rank 990 is half way into (8, 16]
    assert stats.wal_fsync_p99_s == pytest.approx(0.008 + 0.008 * 10 / 20)
    # commit delta: 50 <= 4ms, 100 in (4, 8], 40 in (8, 16], 10 in (16, 32]: rank 198
    assert stats.backend_commit_p99_s == pytest.approx(0.016 + 0.016 * 8 / 10)
    assert stats.source == etcd.SOURCE_ETCD


def test_without_a_start_scrape_the_whole_history_counts() -> None:
    stats = etcd.etcd_stats(None, recorded("etcd_metrics_end.txt"))
    # cumulative fsync: 1475 <= 8ms, 1500 <= 16ms: rank 1485
    assert stats.wal_fsync_p99_s == pytest.approx(0.008 + 0.008 * 10 / 25)


def test_restarted_etcd_counts_from_zero() -> None:
    # the "end" has smaller counters than the "start": etcd restarted, so all of the end is the step
    stats = etcd.etcd_stats(recorded("etcd_metrics_end.txt"), recorded("etcd_metrics_start.txt"))
    # 480 <= 4ms, 495 <= 8ms: rank 495 closes the (4, 8] bucket
    assert stats.wal_fsync_p99_s == pytest.approx(0.008)


def test_missing_metrics_are_none() -> None:
    stats = etcd.etcd_stats(None, Snapshot({}))
    assert stats.db_size_bytes is None
    assert stats.wal_fsync_p99_s is None


def test_fallback_from_the_apiserver() -> None:
    stats = etcd.etcd_stats_from_apiserver(recorded("apiserver_metrics_end.txt"))
    assert stats.db_size_bytes == 52035584
    assert stats.keys_total is None and stats.wal_fsync_p99_s is None
    assert "apiserver_storage_size_bytes" in stats.source


def test_the_declared_families_are_all_the_stats_need() -> None:
    def only(name: str) -> Snapshot:
        return recorded(name, etcd.FAMILIES)

    full = etcd.etcd_stats(recorded("etcd_metrics_start.txt"), recorded("etcd_metrics_end.txt"))
    assert etcd.etcd_stats(only("etcd_metrics_start.txt"), only("etcd_metrics_end.txt")) == full


def _fsync_page(first_bucket: int, total: int) -> Snapshot:
    """An etcd page whose WAL fsyncs are `first_bucket` at most 1 ms and the rest in (1, 2] ms."""
    lines = ["# TYPE etcd_disk_wal_fsync_duration_seconds histogram"]
    for bound, count in (("0.001", first_bucket), ("0.002", total), ("+Inf", total)):
        lines.append(f'etcd_disk_wal_fsync_duration_seconds_bucket{{le="{bound}"}} {count}')
    lines += [f"etcd_disk_wal_fsync_duration_seconds_sum {total * 0.0005}",
              f"etcd_disk_wal_fsync_duration_seconds_count {total}"]
    return Snapshot.parse("\n".join(lines) + "\n")


def test_a_p99_in_the_first_bucket_is_its_bound() -> None:
    # every fsync under 1 ms: interpolation would say 990 µs; the data says only "< 1 ms"
    stats = etcd.etcd_stats(_fsync_page(0, 0), _fsync_page(500, 500))
    assert stats.wal_fsync_p99_s == pytest.approx(0.001)
    assert stats.bounds == {"wal_fsync_p99_s": "<"}
    # with 2 % of them above 1 ms rank 495 falls in (1, 2] ms: an interpolation between two bounds
    stats = etcd.etcd_stats(_fsync_page(0, 0), _fsync_page(490, 500))
    assert stats.wal_fsync_p99_s == pytest.approx(0.001 + 0.001 * 5 / 10) and stats.bounds == {}
