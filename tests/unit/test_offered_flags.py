"""A flag either works or is not offered: `capacity` has no --force (it always runs up to what the machine holds)
and no --no-gate (its exit code is no verdict); `rehearse` refuses, in one line, flags that mean nothing with or
without --rolling."""

from __future__ import annotations

import argparse

import pytest

from loadtests.cli import main as cli
from loadtests.errors import EXIT_BAD_INPUT


def _subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_capacity_does_not_offer_force_or_no_gate(capsys) -> None:
    offered = {option for action in _subcommand("capacity")._actions for option in action.option_strings}
    assert "--force" not in offered and "--no-gate" not in offered
    assert "--max-nodes" in offered and "--kubeconfig" in offered  # the rest of a run's options stay
    help_text = _subcommand("capacity").format_help()
    assert "--force" not in help_text and "--no-gate" not in help_text
    for flag in ("--force", "--no-gate"):
        with pytest.raises(SystemExit) as refused:
            cli.build_parser().parse_args(["capacity", flag])
        assert refused.value.code == EXIT_BAD_INPUT
        assert f"unrecognized arguments: {flag}" in capsys.readouterr().err


def test_run_and_lesson_still_offer_force() -> None:
    for name, flags in (("run", {"--force", "--no-gate"}), ("rehearse", {"--force", "--no-gate"}),
                        ("lesson", {"--force"})):
        offered = {option for action in _subcommand(name)._actions for option in action.option_strings}
        assert flags <= offered, name


@pytest.mark.parametrize(("flags", "said"), [
    (["--no-gate"], "--no-gate goes with --rolling"),
    (["--rolling", "--threshold", "latency_pct=10"], "--threshold goes without --rolling"),
    (["--rollback"], "--rollback goes with --rolling"),
])
def test_rehearse_refuses_a_flag_its_mode_would_ignore(flags: list[str], said: str, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli.SHUTDOWN, "install", lambda: None)  # this process keeps its own signal handlers
    code = cli.main(["rehearse", "--from", "v1.36.3", "--to", "v1.37.2", *flags])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1 and said in err, err
