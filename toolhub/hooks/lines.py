"""A command's output deltas joined into whole lines before ``after`` hooks see them.

A command's output reaches the stream as deltas cut at byte counts (``OutputDeltas``): a
token printed across a cut would reach two items, neither of which a redaction hook can
recognise. So the text after a delta's last newline is held back and put in front of the next
delta of the same kind, and what is left when the call ends is flushed before its result. A
line longer than ``MAX_HELD`` characters is let through as it is, so a command that prints
no newline still streams.
"""

from __future__ import annotations

from toolhub.core import Progress

#: The longest partial line held back.
MAX_HELD = 8192


class LineJoin:
    def __init__(self) -> None:
        self._held: dict[str, tuple[str, Progress]] = {}

    def feed(self, item: Progress) -> Progress | None:
        """``item`` with its delta cut after its last newline (and the held text of its kind
        in front), or None when all of it is held."""
        payload = item.payload
        if item.kind != "custom" or not isinstance(payload, dict):
            return item
        delta = payload.get("delta")
        if not isinstance(delta, str):
            return item
        kind = item.subkind or ""
        held, _ = self._held.pop(kind, ("", item))
        text = held + delta
        cut = text.rfind("\n") + 1
        if cut == 0 and len(text) < MAX_HELD:
            self._held[kind] = (text, item)
            return None
        if cut == 0:
            cut = len(text)
        if cut < len(text):
            self._held[kind] = (text[cut:], item)
        return Progress.custom(item.subkind or "", {**payload, "delta": text[:cut]})

    def flush(self) -> Progress | None:
        """The held text of the first kind that holds some, as one last delta (called until
        None)."""
        for kind, (text, item) in list(self._held.items()):
            del self._held[kind]
            return Progress.custom(item.subkind or "", {**item.payload, "delta": text})
        return None
