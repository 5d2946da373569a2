"""One call's meter as an executor opens it: the figures a call's record carries.

``core.usage`` keeps the running totals that code deep below a tool charges (a command's CPU
seconds and peak memory, from the process backend). What only the executor knows is added
here: the wall time of the tool's run, and the bytes of output the call produced, which are
the UTF-8 bytes of its progress text (a command's output deltas included) and of its result's
text (what the model reads). The executor that sees a call's items charges them, in one place:
the embedded executor for a call it runs itself, the worker's emitter for a call on a worker.

A call that runs inside another call (a tool that calls a tool of another session, in this
process) gets a meter of its own, and its CPU seconds and peak memory also count for the call
that ran it (``fold``): that call's process did the work. Its output bytes do not: the outer
call's output is what the outer call returned.

Every embedded call opens one, the no-op included, so this stays a few attribute writes: the
figures are built only when a record is read.

Threat: none of these figures come from the tool's caller. A tool can only add to its own
call's meter (charging is add-only), so it cannot lower what its tenant is charged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from toolhub.core import CallResult, Progress
from toolhub.core.usage import UsageMeter, current_meter

__all__ = ["CallFigures", "Metered", "output_bytes"]


def output_bytes(item: Progress | CallResult) -> int:
    """The bytes of output ``item`` carries: a result's text, a progress item's text or the
    ``delta`` of its payload (a command's output, ``OutputDeltas``)."""
    if isinstance(item, CallResult):
        text: object = item.prompt_text
    elif item.text is not None:
        text = item.text
    else:
        payload = item.payload
        text = payload.get("delta") if isinstance(payload, dict) else None
    if not isinstance(text, str) or not text:
        return 0
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class CallFigures:
    """What one call used, as its record shows it."""

    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    peak_memory_bytes: int = 0
    output_bytes: int = 0

    def as_record(self) -> dict[str, float | int]:
        """The record's four fields (``cpu_seconds``, ``wall_seconds``, ``peak_memory_bytes``,
        ``output_bytes``)."""
        return {
            "cpu_seconds": round(self.cpu_seconds, 6),
            "wall_seconds": round(self.wall_seconds, 6),
            "peak_memory_bytes": self.peak_memory_bytes,
            "output_bytes": self.output_bytes,
        }


class Metered:
    """A call's meter and the start of its run; ``outer`` is the meter of the call this one
    runs inside, if any (the one open where it is made)."""

    __slots__ = ("meter", "outer", "output", "started", "wall")

    def __init__(self) -> None:
        self.meter = UsageMeter()
        self.outer = current_meter()
        self.started = time.perf_counter()
        self.wall: float | None = None
        #: Output bytes the executor counted (``charge_output``), beside the meter's own.
        self.output = 0

    def charge_output(self, item: Progress | CallResult) -> None:
        """Count ``item``'s output. Not locked: the one consumer of a call's items calls it
        (code on other threads charges the meter itself)."""
        self.output += output_bytes(item)

    def stop(self) -> None:
        """The run ended: its wall time is fixed from now on."""
        if self.wall is None:
            self.wall = time.perf_counter() - self.started

    def fold(self) -> None:
        """Stop, and count this call's CPU seconds and peak memory for the call it ran in."""
        if self.wall is None:  # ``stop``, inline: every embedded call folds
            self.wall = time.perf_counter() - self.started
        outer, self.outer = self.outer, None
        if outer is not None and outer is not self.meter:
            used = self.meter.usage()
            outer.charge(cpu_seconds=used.cpu_seconds, peak_memory_bytes=used.peak_memory_bytes)

    def figures(self) -> CallFigures:
        """The figures so far (a call still running counts its wall time up to now)."""
        used = self.meter.usage()
        wall = self.wall if self.wall is not None else time.perf_counter() - self.started
        output = used.output_bytes + self.output
        return CallFigures(used.cpu_seconds, wall, used.peak_memory_bytes, output)
