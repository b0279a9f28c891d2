"""The command line's value types: each refuses a bad value in one line naming what it expected, before anything
starts (argparse turns the ArgumentTypeError into `loadtest <command>: error: argument --x: ...`, exit 2)."""

from __future__ import annotations

import argparse
import math

from loadtests.errors import LoadTestError
from loadtests.index.db import IndexUrl, parse_url


def count_arg(text: str) -> int:
    """A whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 (got {value})")
    return value


def positive_arg(text: str) -> int:
    """A whole number >= 1."""
    value = count_arg(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1 (got {value})")
    return value


def number_arg(minimum: float, maximum: float = 1e9, what: str = "a number") -> type[float]:
    """A finite number from `minimum` to `maximum` (float() reads "inf" and "nan", which no flag means)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} (got {text!r})") from None
        if not math.isfinite(value) or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"expected {what} from {minimum:g} to {maximum:g} (got {text})")
        return value

    parse.__name__ = what  # argparse names the type in its message
    return parse  # type: ignore[return-value]


factor_arg = number_arg(0.1, what="a factor")
seconds_arg = number_arg(0, what="seconds")


def port_arg(text: str) -> int:
    """A TCP port, 1-65535."""
    port = count_arg(text)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1-65535 (got {port})")
    return port


def index_arg(text: str) -> IndexUrl:
    """A run index: a file path or sqlite:///PATH (SQLite), or a postgresql:// URL."""
    try:
        return parse_url(text)
    except LoadTestError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix(f"--index {text.strip()}: ")) from None
