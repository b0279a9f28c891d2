"""What a command says to its user: one line at a time, flushed, so it interleaves with the components' own
output in order."""

from pathlib import Path

REPORTS_DIR = Path("reports")  # where a command writes when it is given no --out


def say(message: str) -> None:
    print(message, flush=True)
