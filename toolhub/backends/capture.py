"""Bounded capture of a command's output: the first and last bytes in memory, the rest on disk.

A command may print a gigabyte. Memory keeps only a head and a tail of ``keep_bytes`` each; the
full output goes to a log file (itself capped, so a runaway command cannot fill the disk), and
the model is told where that file is.

The log lives under ``$TOOLHUB_HOME``, which can fill up or fail. A write that fails never
reaches the reader thread (which must keep draining the command's pipe, or the command blocks
and the call never ends): the log is closed at once (a deleted log then frees its space), no
later write is tried, and the snapshot's ``log_cut`` says how many bytes of output it holds
and why it stopped, so the call's answer can say what was written and what was lost. The head,
the tail and the byte count in memory go on as before.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

logger = logging.getLogger("toolhub.backends")

DEFAULT_LOG_LIMIT = 64 << 20


@dataclass(frozen=True, slots=True)
class LogCut:
    """Where a command's log stopped because it could not be written: ``written`` bytes of
    the output are in it, and ``reason`` says why no more are (``ENOSPC: No space left on
    device``)."""

    written: int
    reason: str

    def describe(self, total_bytes: int) -> str:
        return (
            f"output log incomplete: {self.written:,} of {total_bytes:,} bytes written "
            f"({self.reason})"
        )


def io_reason(exc: OSError) -> str:
    """An I/O error as ``ENOSPC: No space left on device`` (its errno's name, then its text)."""
    name = errno.errorcode.get(exc.errno) if exc.errno is not None else None
    return f"{name}: {exc.strerror or exc}" if name else str(exc)


@dataclass(frozen=True, slots=True)
class CapturedOutput:
    """An immutable view of captured output at one moment."""

    head: bytes
    tail: bytes
    total_bytes: int
    log_path: Path | None
    #: Set when the log could not be written to the end (a full or failing disk).
    log_cut: LogCut | None = None

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
        self._log_cut: LogCut | None = None
        self._lock = threading.Lock()
        self._log: BinaryIO | None = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: every write reaches the file or fails here, so ``_logged`` is exact.
            self._log = open(log_path, "wb", buffering=0)  # noqa: SIM115 - closed in close()

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
        try:
            self._append(data[:room], counted=True)
            if len(data) > room:
                note = f"\n[toolhub: log truncated at {self.log_limit_bytes} bytes]\n"
                self._append(note.encode(), counted=False)
                self._log_truncated = True
        except OSError as exc:
            self._cut(exc)

    def _append(self, data: bytes, *, counted: bool) -> None:
        """Write all of ``data`` (an unbuffered file may take part of it per call), counting
        the bytes of output that reached the log. Raises ``OSError`` once it takes no more."""
        assert self._log is not None
        view = memoryview(data)
        while view:
            written = self._log.write(view)
            if not written:
                raise OSError(errno.EIO, "the log took no more bytes")
            if counted:
                self._logged += written
            view = view[written:]

    def _cut(self, exc: OSError) -> None:
        """The log cannot be written: say so at its end where the disk still takes it, close
        it, and write no more to it."""
        assert self._log is not None
        self._log_cut = LogCut(self._logged, io_reason(exc))
        logger.warning(
            "command log %s cut at byte %d: %s", self.log_path, self._logged, self._log_cut.reason
        )
        note = f"\n[toolhub: log cut at byte {self._logged}: {self._log_cut.reason}]\n"
        with contextlib.suppress(OSError):
            self._log.write(note.encode())
        with contextlib.suppress(OSError):
            self._log.close()
        self._log = None

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._total

    def snapshot(self) -> CapturedOutput:
        with self._lock:
            tail = b"".join(self._tail)
            if len(tail) > self.keep_bytes:
                tail = tail[-self.keep_bytes :]
            return CapturedOutput(
                bytes(self._head), tail, self._total, self.log_path, self._log_cut
            )

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                try:
                    self._log.close()
                except OSError as exc:  # a failing disk reports a lost write at close
                    self._log_cut = LogCut(self._logged, io_reason(exc))
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
