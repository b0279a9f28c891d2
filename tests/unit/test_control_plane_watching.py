"""Before a replay's window, the run waits until the apiserver shows, on each custom resource the replay installed,
the watches the original's control plane held on it; when they do not come in time, the step says so in a note
and goes on, rather than measuring a window that misses them unsaid."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadtests.config.workload import HeldWatches
from loadtests.run import parts

WIDGETS = HeldWatches("example.com", "widgets", 1)


def context() -> SimpleNamespace:
    said: list[str] = []
    return SimpleNamespace(run=SimpleNamespace(info=None), say=said.append, said=said, notes=[])


def test_the_window_waits_for_the_control_plane_to_watch_what_was_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    scrapes = iter([{}, {("example.com", "widgets"): 0}, {("example.com", "widgets"): 1, ("", "pods"): 3}])
    monkeypatch.setattr(parts, "_open_watches", lambda info, say: next(scrapes))
    ctx = context()
    parts.control_plane_watching(ctx, [WIDGETS], timeout_s=10)  # type: ignore[arg-type]
    assert next(scrapes, None) is None  # waited until the third scrape showed it
    assert ctx.notes == [] and "widgets.example.com 0 of 1" in ctx.said[0]


def test_watches_that_never_come_are_a_note_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parts, "_open_watches", lambda info, say: {})
    ctx = context()
    parts.control_plane_watching(ctx, [WIDGETS], timeout_s=0.01)  # type: ignore[arg-type]
    [note] = ctx.notes
    assert "did not watch what the replay installed within 0 s" in note and "widgets.example.com 0 of 1" in note
