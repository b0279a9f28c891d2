"""A window's samples kept on disk as they are taken, read back once when the window is summarised.

A sampler that keeps every sample in a list grows for as long as its window lasts: over a soak of hours the list
is the harness's own memory rising, and each sample kept among the scrape's short-lived objects also pins the
allocator's arenas around it, so the process's RSS rises faster than the samples' size. The harness's rows are
judged in every soak, so its samplers hold one sample at a time and spool the rest: one JSON line each, in an
anonymous file that is gone when it is closed. JSON keeps a float exactly (its shortest repr), so what is read back
equals what was written.

The same lines, in a named file and fsync'd as each is written, are a soak's samples on disk (results/soak.py): one
writer for both.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Spool(Generic[T]):
    """Dataclass items appended one JSON line each: to an unlinked temporary file, or (`path`) to that file,
    added to, with `durable` each line flushed and fsync'd before append returns; items() reads them back in
    order."""

    def __init__(self, decode: Callable[[dict[str, Any]], T], path: Path | None = None, *,
                 durable: bool = False) -> None:
        self._decode = decode
        self._durable = durable
        if path is None:
            self._file = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 - closed by close()
        else:
            self._file = path.open("a+", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.path = path
        self._lock = threading.Lock()
        self.count = 0

    def append(self, item: T) -> None:
        line = json.dumps(asdict(item), separators=(",", ":"))  # type: ignore[call-overload]
        with self._lock:
            self._file.write(line + "\n")
            self.count += 1
            if self._durable:
                self._file.flush()
                os.fsync(self._file.fileno())

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
