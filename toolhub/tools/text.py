"""Text helpers shared by the file tools: bounded line streaming, binary and image sniffing,
the line-number gutter, and names of the client's tools for hints.

Everything here reads files incrementally: no helper holds more than one (capped) line or one
fixed-size chunk in memory, whatever the size of the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from toolhub.core import ToolContext, ToolKind

CHUNK = 1 << 16
SNIFF_BYTES = 8192
GUTTER = 6
MAX_EDIT_BYTES = 10 << 20
"""The largest file ``edit_file`` and ``apply_patch`` read whole (they refuse bigger ones)."""
SCAN_LIMIT = 100_000
"""Entries read from one directory at most: a directory of millions costs this, not millions."""

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def iter_lines(handle: BinaryIO, max_line_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Lines without their terminator, each cut to ``max_line_bytes``, with the line's full
    length in bytes. A 100 MB line costs ``max_line_bytes`` of memory, not 100 MB."""
    while True:
        piece = handle.readline(max_line_bytes + 1)
        if not piece:
            return
        if piece.endswith(b"\n"):
            yield piece[:-1], len(piece) - 1
            continue
        length = len(piece)
        kept = piece[:max_line_bytes]
        if length > max_line_bytes:
            while more := handle.readline(CHUNK):
                if more.endswith(b"\n"):
                    length += len(more) - 1
                    break
                length += len(more)
        yield kept, length


def count_lines(handle: BinaryIO) -> int:
    """Lines from the current position to the end (a last line without a newline counts)."""
    count = 0
    last = b"\n"
    while chunk := handle.read(CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def looks_binary(sample: bytes) -> bool:
    """A NUL byte in the first few KiB: what git and grep use to call a file binary."""
    return b"\0" in sample[:SNIFF_BYTES]


def image_mime(sample: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if sample.startswith(magic):
            return mime
    if sample[:4] == b"RIFF" and sample[8:12] == b"WEBP":
        return "image/webp"
    return None


def decode_line(raw: bytes) -> str:
    """A line as text: UTF-8, undecodable bytes shown as U+FFFD, a trailing CR dropped."""
    return raw.decode("utf-8", "replace").removesuffix("\r")


def clip(text: str, max_chars: int, full_bytes: int | None = None) -> str:
    """``text`` cut to ``max_chars`` with a note saying how long it really was."""
    if len(text) <= max_chars and (full_bytes is None or full_bytes <= len(text.encode())):
        return text
    size = f"{full_bytes} bytes" if full_bytes is not None else f"{len(text)} chars"
    return f"{text[:max_chars]}… [line truncated, {size}]"


def gutter(number: int | None, text: str) -> str:
    """``     7→text`` when numbered, else the same width of blanks, so every line's text starts
    at the same column."""
    if number is None:
        return f"{'':>{GUTTER}} {text}"
    return f"{number:>{GUTTER}}→{text}"


def kind_name(ctx: ToolContext, kind: ToolKind, default: str) -> str:
    """The client's name for the first tool of ``kind`` (what hints should tell the model to
    call), or ``default`` when the tool set has none."""
    return ctx.renderer.by_kind.get(kind.value) or default
