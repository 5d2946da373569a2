"""Bounded capture of a command's output: the first and last bytes in memory, the rest on disk.

A command may print a gigabyte. Memory keeps only a head and a tail of ``keep_bytes`` each; the
full output goes to a log file (itself capped, so a runaway command cannot fill the disk), and
the model is told where that file is.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

DEFAULT_LOG_LIMIT = 64 << 20


@dataclass(frozen=True, slots=True)
class CapturedOutput:
    """An immutable view of captured output at one moment."""

    head: bytes
    tail: bytes
    total_bytes: int
    log_path: Path | None

    @property
    def contiguous(self) -> bool:
        """True when ``head + tail`` is the whole output (nothing dropped in between)."""
        return len(self.head) + len(self.tail) == self.total_bytes

    def head_and_tail(self, limit: int) -> tuple[str, int]:
        """Text of at most ``limit`` bytes: the whole output when it fits, else its first and
        last halves joined by a ``...`` line. Returns ``(text, omitted_bytes)``."""
        if self.total_bytes <= limit and self.contiguous:
            return decode(self.head + self.tail), 0
        half = max(limit // 2, 1)
        first = _cut_end(self.head[:half])
        last = _cut_start(self._last(half))
        omitted = self.total_bytes - len(first) - len(last)
        if omitted <= 0:
            return decode(self.head + self.tail), 0
        return decode(first) + "\n...\n" + decode(last), omitted

    def first(self, limit: int) -> tuple[str, int]:
        """The first ``limit`` bytes as text, and how many bytes were left out after them."""
        data = self.head + self.tail if self.contiguous else self.head
        shown = _cut_end(data[:limit]) if len(data) > limit else data
        return decode(shown), self.total_bytes - len(shown)

    def last(self, limit: int) -> tuple[str, int]:
        """The last ``limit`` bytes as text, and how many bytes came before them."""
        shown = _cut_start(self._last(limit))
        return decode(shown), self.total_bytes - len(shown)

    def _last(self, n: int) -> bytes:
        if len(self.tail) >= n or not self.contiguous:
            return self.tail[-n:]
        return (self.head + self.tail)[-n:]


class OutputCapture:
    """Thread-safe sink: ``write`` from the reader thread, ``snapshot`` from anywhere."""

    def __init__(
        self,
        keep_bytes: int,
        log_path: Path | None = None,
        log_limit_bytes: int = DEFAULT_LOG_LIMIT,
    ) -> None:
        self.keep_bytes = max(keep_bytes, 1)
        self.log_path = log_path
        self.log_limit_bytes = log_limit_bytes
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._total = 0
        self._logged = 0
        self._log_truncated = False
        self._lock = threading.Lock()
        self._log: BinaryIO | None = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._total += len(data)
            room = self.keep_bytes - len(self._head)
            if room > 0:
                self._head += data[:room]
            if len(data) > room:
                self._push_tail(data[max(room, 0) :])
            self._write_log(data)

    def _push_tail(self, data: bytes) -> None:
        if len(data) >= self.keep_bytes:
            self._tail.clear()
            self._tail.append(data[-self.keep_bytes :])
            self._tail_size = self.keep_bytes
            return
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail_size - len(self._tail[0]) >= self.keep_bytes:
            self._tail_size -= len(self._tail.popleft())

    def _write_log(self, data: bytes) -> None:
        if self._log is None or self._log_truncated:
            return
        room = self.log_limit_bytes - self._logged
        self._log.write(data[:room])
        self._logged += min(room, len(data))
        if len(data) > room:
            note = f"\n[toolhub: log truncated at {self.log_limit_bytes} bytes]\n"
            self._log.write(note.encode())
            self._log_truncated = True
        self._log.flush()

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._total

    def snapshot(self) -> CapturedOutput:
        with self._lock:
            tail = b"".join(self._tail)
            if len(tail) > self.keep_bytes:
                tail = tail[-self.keep_bytes :]
            return CapturedOutput(bytes(self._head), tail, self._total, self.log_path)

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _cut_end(data: bytes) -> bytes:
    """Drop a trailing partial UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue
        if byte & 0x80 == 0:
            return data
        width = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
        return data if back >= width else data[:-back]
    return data


def _cut_start(data: bytes) -> bytes:
    """Drop leading UTF-8 continuation bytes (the end of a character cut in half)."""
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]
