"""What the session needs from an executor. Everything above this seam (lookup, remapping,
validation) and below it (the tool pipeline) is shared by every executor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from toolhub.core import CallResult, Progress
from toolhub.toolset import Prepared


class Executor(Protocol):
    def stream(self, prepared: Prepared) -> AsyncIterator[Progress | CallResult]:
        """Progress items, then exactly one ``CallResult``."""
        ...

    def call_sync(self, prepared: Prepared) -> CallResult | None:
        """The result without an event loop when this executor can do that, else None."""
        ...

    async def cancel(self, call_id: str) -> bool:
        """Request cancellation; True when the call was known and running or queued."""
        ...

    def close(self) -> None: ...
