"""How stream items cross processes: msgpack, never pickle.

An event payload is ``{"t": "p" | "r", "v": item.to_dict(), "a": attempt}``. On the pub/sub
channel it travels framed as ``b"<seq>|<state_version>|<payload>"`` so that a consumer can
deduplicate by sequence number before decoding; in the stream the sequence number is the entry
id (``0-<seq>``) itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import msgpack

from toolhub.core import CallResult, Progress


def pack(value: Any) -> bytes:
    return cast(bytes, msgpack.packb(value, use_bin_type=True))


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def encode_item(item: Progress | CallResult, attempt: int) -> bytes:
    kind = "r" if isinstance(item, CallResult) else "p"
    return pack({"t": kind, "v": item.to_dict(), "a": attempt})


def decode_item(payload: bytes) -> Progress | CallResult:
    data = unpack(payload)
    if data["t"] == "r":
        return CallResult.from_dict(data["v"])
    return Progress.from_dict(data["v"])


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One item of a call's event stream, with its sequence number (an SSE event id)."""

    seq: int
    item: Progress | CallResult
    state_version: int | None = None

    @property
    def terminal(self) -> bool:
        return isinstance(self.item, CallResult)


def parse_frame(frame: bytes) -> tuple[int, int | None, bytes]:
    """Split a pub/sub frame into (seq, state version or None, payload)."""
    seq, version, payload = frame.split(b"|", 2)
    return int(seq), (int(version) if version else None), payload
