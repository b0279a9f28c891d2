"""Errors meant for people: each carries one line that says what is wrong and what to do."""


class LoadTestError(Exception):
    """Base of every error the CLI prints as one line and exits non-zero on, without a traceback."""

    exit_code = 2


class SetupError(LoadTestError):
    """Binaries or toolchains are missing or cannot be provided."""


class PlanError(LoadTestError):
    """The plan file is invalid: the message names the field path and the reason."""


class TargetError(LoadTestError):
    """The control plane could not be started, reached, or is refused (safety guard)."""


class RunAborted(LoadTestError):
    """A run stopped before its last step (a component died, or the user interrupted)."""

    exit_code = 3


class CompareError(LoadTestError):
    """Two runs cannot be compared (different plans, unmatched steps) or the regression thresholds are invalid."""
