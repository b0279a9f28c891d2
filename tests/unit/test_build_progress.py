"""Progress of the Go builds in setup: counted from synthetic `go list` / `go build -v` output, no Go needed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest

from loadtests.binaries import build, progress
from loadtests.binaries.progress import (
    BuildScope,
    estimate_remaining_s,
    format_duration,
    parse_go_list,
    progress_line,
    run_counting,
    scope_line,
)
from loadtests.errors import SetupError

GO_LIST = (
    "internal/goarch\ttrue\tbuild ID mismatch\n"
    "unsafe\tfalse\t\n"
    "fmt\tfalse\t\n"
    "example.local/m/lib\ttrue\tstale dependency: internal/goarch\n"
    "example.local/m/cmd/hello\ttrue\tnot installed but available in build cache\n"
    "\n"
)


def test_go_list_counts_only_what_needs_compiling() -> None:
    scope = parse_go_list(GO_LIST)
    assert scope.packages == {"internal/goarch", "unsafe", "fmt", "example.local/m/lib", "example.local/m/cmd/hello"}
    # a main package whose compiled form is cached is only linked, which -v does not print
    assert scope.to_compile == 2


def test_empty_go_list_output_is_an_empty_scope() -> None:
    assert parse_go_list("") == BuildScope(frozenset(), 0)


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (59.4, "59s"), (60, "1m00s"), (605, "10m05s"),
                                               (3725, "1h02m"), (-3, "0s")])
def test_durations_are_short(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_estimate_is_linear_in_the_pace_so_far() -> None:
    assert estimate_remaining_s(100, 400, 60.0) == pytest.approx(180.0)


@pytest.mark.parametrize(("done", "total", "elapsed"), [
    (5, 400, 10.0),      # too few packages for a pace
    (30, 2500, 60.0),    # under 2% of a large build
    (400, 400, 60.0),    # nothing left to compile (linking)
    (410, 400, 60.0),    # more than counted: no negative estimate
    (50, None, 60.0),    # total unknown
    (50, 0, 60.0),
    (50, 400, 0.0),
])
def test_no_estimate_when_it_would_mean_nothing(done: int, total: int | None, elapsed: float) -> None:
    assert estimate_remaining_s(done, total, elapsed) is None


def test_progress_line_says_done_total_elapsed_and_time_left() -> None:
    line = progress_line("kube v1.37.2", 600, 2400, 200.0)
    assert line == "kube v1.37.2: 600/2400 packages compiled (25%), 3m20s elapsed, about 10m00s left"
    assert "\n" not in line


def test_progress_line_before_the_pace_is_known() -> None:
    assert progress_line("etcd v3.6.16", 3, 500, 12.0) == (
        "etcd v3.6.16: 3/500 packages compiled (0%), 12s elapsed, estimating time left")


def test_progress_line_once_everything_is_compiled_says_linking() -> None:
    assert progress_line("kwok v0.8.0", 300, 300, 95.0) == "kwok v0.8.0: 300 packages compiled, 1m35s elapsed; linking"


def test_progress_line_without_a_total_claims_no_estimate() -> None:
    assert progress_line("kwok v0.8.0", 42, None, 30.0) == "kwok v0.8.0: 42 packages compiled, 30s elapsed"


def test_scope_line_is_honest_about_the_build_cache() -> None:
    line = scope_line("kube v1.37.2", BuildScope(frozenset(f"p{i}" for i in range(2454)), 1595))
    assert "up to 1595 of 2454 packages to compile (859 in Go's build cache)" in line
    assert scope_line("etcd v3.6.16", BuildScope(frozenset({"a", "b"}), 0)) == (
        "etcd v3.6.16: all 2 packages are in Go's build cache; linking only")
    assert "unknown" in scope_line("kwok v0.8.0", None)


FAKE_GO_BUILD = """
import sys, time
for line in ["go: downloading example.com/x v1.0.0", "internal/goarch", "example.local/m/lib"]:
    print(line, file=sys.stderr, flush=True)
    time.sleep(0.3)
print("# example.local/m/cmd/hello", file=sys.stderr)
print("cmd/hello/main.go:3:1: syntax error", file=sys.stderr, flush=True)
time.sleep(0.5)
sys.exit(int(sys.argv[1]))
"""


def _fake_build(tmp_path: Path, exit_code: int) -> tuple[int, list[str], list[tuple[int, float]]]:
    ticks: list[tuple[int, float]] = []
    packages = parse_go_list(GO_LIST).packages
    code, others = run_counting(
        [sys.executable, "-c", FAKE_GO_BUILD, str(exit_code)], tmp_path, {},
        counts=lambda line: line in packages, tick=lambda done, elapsed: ticks.append((done, elapsed)),
        interval_s=0.25,
    )
    return code, others, ticks


def test_run_counting_counts_package_lines_and_ticks_on_a_timer(tmp_path: Path) -> None:
    code, others, ticks = _fake_build(tmp_path, 0)
    assert code == 0
    # about 1.4 s of output at 0.25 s: a handful of ticks, not one per line
    assert 3 <= len(ticks) <= 8, ticks
    counts = [done for done, _ in ticks]
    assert counts == sorted(counts) and counts[-1] == 2
    elapsed = [e for _, e in ticks]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0.2
    # what was not a package is kept for the error message
    assert others == ["go: downloading example.com/x v1.0.0", "# example.local/m/cmd/hello",
                      "cmd/hello/main.go:3:1: syntax error"]


def test_run_counting_returns_the_failure_and_its_lines(tmp_path: Path) -> None:
    code, others, _ = _fake_build(tmp_path, 1)
    assert code == 1 and others[-1] == "cmd/hello/main.go:3:1: syntax error"


def test_go_build_reports_progress_through_log_and_fails_in_one_error(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The one path all three builds (kube, etcd, kwok) take, with go list and go build replaced."""
    monkeypatch.setattr(build, "PROGRESS_INTERVAL_S", 0.25)
    monkeypatch.setattr(build, "_build_scope", lambda *_a: parse_go_list(GO_LIST))
    real = progress.run_counting

    def fake_run(argv: list[str], cwd: Path, env: dict[str, str], **kwargs):
        assert argv[:3] == ["go", "build", "-v"] and argv[-1] == "./cmd/hello" and env["CGO_ENABLED"] == "0"
        return real([sys.executable, "-c", FAKE_GO_BUILD, "1"], cwd, env, **kwargs)

    monkeypatch.setattr(build, "run_counting", fake_run)
    lines: list[str] = []
    with pytest.raises(SetupError) as error:
        build._go_build("hello v1", ["-trimpath"], ["./cmd/hello"], str(tmp_path / "out"), tmp_path, lines.append)
    assert lines[0].startswith("hello v1: up to 2 of 5 packages to compile (3 in Go's build cache)")
    assert any(line.startswith("hello v1: 2 packages compiled") and "linking" in line for line in lines[1:]), lines
    assert str(error.value).startswith("`go build` of hello v1 failed") and "syntax error" in str(error.value)


FAKE_GO_WITH_COMPILER = """
import subprocess, sys, time
compiler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(f"compiler {compiler.pid}", flush=True)
time.sleep(60)
"""


def test_an_interrupt_stops_go_and_the_compilers_it_started(tmp_path: Path) -> None:
    seen: list[str] = []

    def note(line: str) -> bool:
        seen.append(line)
        return False

    def interrupt(_done: int, _elapsed: float) -> None:
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_counting([sys.executable, "-c", FAKE_GO_WITH_COMPILER], tmp_path, {},
                     counts=note, tick=interrupt, interval_s=0.5)
    assert time.monotonic() - started < 15  # SIGINT, or SIGKILL 5 s later where SIGINT is ignored
    (pid,) = [int(line.split()[1]) for line in seen if line.startswith("compiler ")]
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the compiler outlived the interrupted build"
        time.sleep(0.1)


def test_progress_line_near_the_end_does_not_promise_zero_seconds() -> None:
    assert progress_line("kube v1.36.3", 2011, 2013, 264.0).endswith("about 0s left") is False
    assert progress_line("kube v1.36.3", 2011, 2013, 264.0).endswith("almost done")
