"""A step whose load has no user (a replay of a profile without traffic) starts no load generator: Locust with no
user ends at once, which a loaded step takes for a crash. The window is then held by time alone."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from loadtests.results import StepResult
from loadtests.results.loadgen import LoadgenSection
from loadtests.run.parts import Load


class _NoUsers:
    """A load generator asked for no user: any call but `users` would be a mistake here."""

    users = SimpleNamespace(total=0)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a load with no user was asked to {name}")


def test_a_load_without_users_holds_the_window_by_time_and_records_no_client() -> None:
    said: list[str] = []
    ctx = SimpleNamespace(step=SimpleNamespace(duration_s=0.2), opened=None, say=said.append,
                          run=SimpleNamespace(elapsed=lambda: "0m00s"))
    part = Load()
    part.load = _NoUsers()  # type: ignore[assignment]
    assert part.quiet
    part.start(ctx)  # type: ignore[arg-type]
    assert said == ["no load in this step: the window is held for 0 s"]
    ctx.opened = time.monotonic()
    part.hold(ctx)  # type: ignore[arg-type]
    assert time.monotonic() - ctx.opened >= 0.2
    result = StepResult(index=0, name="s", nodes=1, pods_per_node=0, started_at="", duration_s=0.2)
    part.finish(ctx, result)  # type: ignore[arg-type]
    assert result.section(LoadgenSection) == LoadgenSection() and "loadgen" in result.sections
