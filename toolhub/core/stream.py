"""What a running call streams: zero or more ``Progress`` items, then exactly one terminal.

Items are plain data with ``to_dict``/``from_dict`` so that they cross process boundaries (msgpack
over Redis, SSE, MCP) without pickling and come back equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

MAX_DELTA_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class ContentBlock:
    """Text, an image (base64 ``data``) or a resource reference, as MCP and Anthropic carry them."""

    type: Literal["text", "image", "resource"]
    text: str | None = None
    data: str | None = None
    mime_type: str | None = None
    uri: str | None = None
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in _fields(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentBlock:
        return cls(
            data["type"],
            text=data.get("text"),
            data=data.get("data"),
            mime_type=data.get("mime_type"),
            uri=data.get("uri"),
            path=data.get("path"),
        )


_BLOCK_FIELDS = ("type", "text", "data", "mime_type", "uri", "path")


def _fields(block: ContentBlock) -> dict[str, Any]:
    return {name: getattr(block, name) for name in _BLOCK_FIELDS}


@dataclass(frozen=True, slots=True)
class Progress:
    """One intermediate update: ``text``, ``content`` blocks, or a ``custom`` subkind + payload."""

    kind: Literal["text", "content", "custom"]
    text: str | None = None
    blocks: tuple[ContentBlock, ...] = ()
    subkind: str | None = None
    payload: Any = None

    @classmethod
    def of_text(cls, text: str) -> Progress:
        return cls("text", text=text)

    @classmethod
    def of_content(cls, *blocks: ContentBlock) -> Progress:
        return cls("content", blocks=tuple(blocks))

    @classmethod
    def custom(cls, subkind: str, payload: Any = None) -> Progress:
        return cls("custom", subkind=subkind, payload=payload)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.text is not None:
            out["text"] = self.text
        if self.blocks:
            out["blocks"] = [b.to_dict() for b in self.blocks]
        if self.subkind is not None:
            out["subkind"] = self.subkind
        if self.payload is not None:
            out["payload"] = self.payload
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Progress:
        return cls(
            data["kind"],
            text=data.get("text"),
            blocks=tuple(ContentBlock.from_dict(b) for b in data.get("blocks", ())),
            subkind=data.get("subkind"),
            payload=data.get("payload"),
        )


@dataclass(slots=True)
class OutputDeltas:
    """Turns a growing output (a command's stdout) into append-only progress deltas.

    Each delta is at most ``max_delta_bytes`` and cut on a UTF-8 boundary, so a consumer that
    concatenates the deltas gets exactly the bytes produced, decoded without replacement
    characters. Bytes that would split a character are held back for the next delta.
    """

    subkind: str = "output_delta"
    max_delta_bytes: int = MAX_DELTA_BYTES
    total_bytes: int = 0
    _pending: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> list[Progress]:
        self._pending += data
        items: list[Progress] = []
        while self._pending:
            take = _utf8_prefix_len(self._pending, self.max_delta_bytes)
            if take == 0:
                break
            chunk = bytes(self._pending[:take])
            del self._pending[:take]
            self.total_bytes += take
            items.append(
                Progress.custom(
                    self.subkind,
                    {"delta": chunk.decode("utf-8", "replace"), "total_bytes": self.total_bytes},
                )
            )
        return items

    def flush(self) -> list[Progress]:
        """Emit whatever is left, even a truncated character (the stream is over)."""
        if not self._pending:
            return []
        chunk = bytes(self._pending)
        self._pending.clear()
        self.total_bytes += len(chunk)
        return [
            Progress.custom(
                self.subkind,
                {"delta": chunk.decode("utf-8", "replace"), "total_bytes": self.total_bytes},
            )
        ]


def _utf8_prefix_len(data: bytearray, limit: int) -> int:
    """Length of the longest prefix of ``data`` (at most ``limit`` bytes) that does not split a
    UTF-8 character; 0 when all there is so far is the start of one character."""
    end = min(len(data), limit)
    lead = end - 1
    while lead > 0 and end - lead < 4 and (data[lead] & 0xC0) == 0x80:
        lead -= 1
    if lead < 0:
        return 0
    width = _char_width(data[lead])
    if lead + width <= end:
        return end
    # Invalid bytes can never complete: pass them through rather than stall the stream.
    return lead if lead > 0 or end < limit else end


def _char_width(lead: int) -> int:
    if lead >> 5 == 0b110:
        return 2
    if lead >> 4 == 0b1110:
        return 3
    if lead >> 3 == 0b11110:
        return 4
    return 1
