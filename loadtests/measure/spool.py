"""A window's samples kept on disk as they are taken, read back once when the window is summarised.

A sampler that keeps every sample in a list grows for as long as its window lasts: over a soak of hours the list
is the harness's own memory rising, and each sample kept among the scrape's short-lived objects also pins the
allocator's arenas around it, so the process's RSS rises faster than the samples' size. The harness's rows are
judged in every soak, so its samplers hold one sample at a time and spool the rest: one JSON line each, in an
anonymous file that is gone when it is closed. JSON keeps a float exactly (its shortest repr), so what is read back
equals what was written.
"""

from __future__ import annotations

import io
import json
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Spool(Generic[T]):
    """Dataclass items appended to an unlinked temporary file; items() reads them all back in order."""

    def __init__(self, decode: Callable[[dict[str, Any]], T]) -> None:
        self._decode = decode
        self._file = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self.count = 0

    def append(self, item: T) -> None:
        line = json.dumps(asdict(item), separators=(",", ":"))  # type: ignore[call-overload]
        with self._lock:
            self._file.write(line + "\n")
            self.count += 1

    def items(self) -> list[T]:
        """Every item appended so far, decoded (appending may go on afterwards)."""
        with self._lock:
            self._file.flush()
            self._file.seek(0)
            found = [self._decode(json.loads(line)) for line in self._file]
            self._file.seek(0, io.SEEK_END)
        return found

    def close(self) -> None:
        """Drop the file (safe to call again)."""
        with self._lock:
            self._file.close()
