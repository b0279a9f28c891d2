"""The heap held still through a window: frozen from just before the scrape that opens it to the one that closes
it, thawed after a gathered window and after an aborted one, nested holds thawed at the last release."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from loadtests.analysis.metrics import Snapshot
from loadtests.measure import heap
from loadtests.measure import probes as probes_module
from loadtests.measure.probes import StepProbes
from tests.unit.test_measure_probes import step, unreachable_target


def test_a_hold_freezes_what_is_alive_and_the_last_release_thaws_it() -> None:
    kept = [{"alive": n} for n in range(100)]  # tracked objects alive as the heap is held
    heap.hold()
    try:
        assert heap.held() and gc.get_freeze_count() >= len(kept)
        heap.hold()  # a nested hold
        heap.release()
        assert heap.held() and gc.get_freeze_count() >= len(kept)
    finally:
        heap.release()
    assert not heap.held() and gc.get_freeze_count() == 0
    heap.release()  # without a hold: nothing
    assert not heap.held()


@pytest.mark.parametrize("ending", ["gather", "stop"])
def test_a_window_holds_the_heap_from_its_opening_scrape_to_its_end(monkeypatch: pytest.MonkeyPatch,
                                                                   ending: str) -> None:
    frozen_at_scrapes: list[int] = []

    def scrape(access: Any, **_: Any) -> Snapshot:
        frozen_at_scrapes.append(gc.get_freeze_count())
        return Snapshot({})

    monkeypatch.setattr(probes_module, "scrape_apiserver", scrape)
    probes = StepProbes(unreachable_target({}), "probe-ns", "churn-ns", probes=("apiserver",))
    probes.start()
    assert heap.held()
    if ending == "gather":
        probes.gather(step())
        assert len(frozen_at_scrapes) == 2 and all(count > 0 for count in frozen_at_scrapes)
    else:
        probes.stop()
    assert not heap.held() and gc.get_freeze_count() == 0
    probes.stop()  # again: nothing more to thaw
    assert not heap.held()
