"""What the session needs from an executor. Everything above this seam (lookup, remapping,
validation) and below it (the tool pipeline) is shared by every executor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from toolhub.core import CallResult, Progress
from toolhub.toolset import Prepared


class Executor(Protocol):
    def stream(
        self, prepared: Prepared, *, cancel_on_exit: bool = True
    ) -> AsyncIterator[Progress | CallResult]:
        """Progress items, then exactly one ``CallResult``. A consumer that leaves before the
        result (closes the stream, or its task is cancelled) cancels the call; with
        ``cancel_on_exit=False`` a call that can outlive its stream (one on a worker) goes on
        running, to be followed by id."""
        ...

    async def result(self, prepared: Prepared) -> CallResult:
        """The ``CallResult`` that ``stream`` would end with, its progress passed over: what
        ``Session.call`` waits for. Cancelling the awaiting task cancels the call."""
        ...

    def call_sync(self, prepared: Prepared) -> CallResult | None:
        """The result without an event loop when this executor can do that, else None."""
        ...

    async def cancel(self, call_id: str) -> bool:
        """Request cancellation; True when the call was known and running or queued."""
        ...

    def record(self, call_id: str) -> dict[str, Any] | None:
        """The call's record (status, attempts, result ...), or None when it is unknown."""
        ...

    def follow(self, call_id: str, after_seq: int = 0) -> AsyncIterator[Progress | CallResult]:
        """A call started earlier (by this process or, distributed, any other): its progress
        after ``after_seq`` where the executor keeps it, then exactly one ``CallResult``."""
        ...

    def deadline_seconds(self, workload: str | None) -> float | None:
        """How long a caller may wait for a call at most when it names no timeout (None:
        no bound beyond the tool's own)."""
        ...

    def end(self) -> None:
        """End the session for every process: a distributed one forgets its stored record,
        so no dispatcher rebuilds it and no worker runs a new call of it."""
        ...

    def close(self) -> None:
        """Cancel every call still awaited here (``stream``'s ``cancel_on_exit`` aside)."""
        ...
