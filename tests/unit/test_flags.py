"""The command line's value types refuse what no flag means: inf, nan, negatives, out of range."""

from __future__ import annotations

import argparse

import pytest

from loadtests.cli.flags import count_arg, factor_arg, port_arg, seconds_arg


@pytest.mark.parametrize(("parse", "text", "said"), [
    (seconds_arg, "inf", "expected seconds from 0 to 1e+09 (got inf)"),
    (seconds_arg, "nan", "expected seconds from 0 to 1e+09 (got nan)"),
    (seconds_arg, "-1", "expected seconds from 0 to 1e+09 (got -1)"),
    (seconds_arg, "soon", "expected seconds (got 'soon')"),
    (factor_arg, "0.01", "expected a factor from 0.1 to 1e+09 (got 0.01)"),
    (factor_arg, "1e300", "expected a factor from 0.1 to 1e+09 (got 1e300)"),
    (count_arg, "-2", "expected a whole number >= 0 (got -2)"),
    (count_arg, "2.5", "expected a whole number >= 0 (got '2.5')"),
    (port_arg, "70000", "a port is 1-65535 (got 70000)"),
])
def test_bad_values_are_one_line(parse, text: str, said: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as error:
        parse(text)
    assert str(error.value) == said


def test_good_values_pass() -> None:
    assert seconds_arg("0") == 0 and seconds_arg("2.5") == 2.5
    assert factor_arg("0.1") == 0.1 and count_arg("0") == 0 and port_arg("8089") == 8089
