"""A call record as readers see it: the Redis hash decoded to JSON-able data (numbers as numbers,
the result as a dict, every attempt listed), for ``Session.record``, the gateway and the CLI.

The queued message (which holds the model's arguments) and the bookkeeping fields are left
out: a record read is never a way to read another caller's arguments back.
"""

from __future__ import annotations

import json
from typing import Any

from .codec import unpack

__all__ = ["decode_record"]

#: The usage figures of a finished call (``usage.py``), kept in the record's one ``usage`` field
#: as "cpu wall peak output".
_USAGE = ("cpu_seconds", "wall_seconds", "peak_memory_bytes", "output_bytes")


def decode_record(raw: dict[bytes, bytes]) -> dict[str, Any]:
    """A call record as JSON-able data: numbers as numbers, the result as a dict, every
    attempt listed. The queued message (which holds the arguments) is left out."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.decode()
        if name in {"message", "qkey", "qpos", "trace", "quota_held", "fair"}:
            continue
        if name == "result":
            out[name] = unpack(value)
        elif name == "attempts":
            out[name] = [_attempt(a) for a in json.loads(value)]
        elif name == "approval":
            out[name] = json.loads(value)
        elif name == "usage":
            cpu, wall, peak, output = value.split()
            out.update(zip(_USAGE, (float(cpu), float(wall), int(peak), int(output)), strict=True))
        elif name in {"seq", "attempt", "lost", "max_attempts", "requeued", "resumed"}:
            out[name] = int(value)
        elif name.endswith("_at") or name in {"lease_until", "claim_by", "approval_expires"}:
            out[name] = float(value)
        elif name in {"cancel_requested", "handoff"}:
            out[name] = value == b"1"
        else:
            out[name] = value.decode()
    out.setdefault("attempts", [])
    return out


def _attempt(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: float(value) if key.endswith("_at") else value for key, value in entry.items()}
