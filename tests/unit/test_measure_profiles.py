"""The profiler of a window, where nothing answers: one note says what was not profiled and why, nothing is kept,
and the other probes are not held up (the profiles themselves are read from a real control plane in
tests/integration/test_run.py)."""

from __future__ import annotations

import time
from pathlib import Path

from loadtests.measure.probes import StepProbes
from loadtests.measure.profiles import ProfileSettings
from tests.unit.test_measure_probes import step, unreachable_target


def test_an_unreachable_target_is_one_note_and_no_profile(tmp_path: Path) -> None:
    settings = ProfileSettings(tmp_path / "step-1" / "profiles", tmp_path, window_s=1.0)
    probes = StepProbes(unreachable_target({}), "probe-ns", "churn-ns", profiles=settings)
    started = time.monotonic()
    probes.start()
    result = probes.gather(step())
    assert time.monotonic() - started < 20  # refused at once: the window does not wait for the profile's seconds
    assert result.profiles == []
    noted = [note for note in result.notes if note.startswith("not profiled")]
    assert len(noted) == 1, result.notes
    for what in ("etcd: not reachable on this target", "kube-apiserver cpu:", "kube-apiserver heap:"):
        assert what in noted[0], noted
    assert list(settings.folder.iterdir()) == []


def test_a_window_without_profiles_starts_no_profiler(tmp_path: Path) -> None:
    probes = StepProbes(unreachable_target({}), "probe-ns", "churn-ns")
    probes.start()
    result = probes.gather(step())
    assert result.profiles == [] and not [n for n in result.notes if "profil" in n]


def test_an_apiserver_replaced_in_the_window_is_not_cpu_profiled(tmp_path: Path) -> None:
    """A graceful stop waits for the requests in flight: a CPU profile of the window's length would hold a rolling
    upgrade's or a restart's apiserver until it ended, so its CPU is not asked for, and the note says why."""
    settings = ProfileSettings(tmp_path / "step-1" / "profiles", tmp_path, window_s=1.0,
                               apiserver_cpu_skipped="it is restarted in this window")
    probes = StepProbes(unreachable_target({}), "probe-ns", "churn-ns", profiles=settings)
    probes.start()
    result = probes.gather(step())
    (noted,) = [note for note in result.notes if note.startswith("not profiled")]
    assert "kube-apiserver cpu: it is restarted in this window" in noted, noted
    assert "kube-apiserver heap:" in noted  # its heap is still asked for at the close (here nothing answers)
