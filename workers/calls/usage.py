"""What one attempt on this worker used, charged to the call's tenant when it ends.

The attempt opens a meter around its work (``claimed.run_attempt``): the commands it runs
charge their CPU seconds and peak memory to it (the process backend), a nested embedded call
folds its own into it (``executors.metered``), and the attempt's emitter charges the bytes of
output it publishes. The terminal carries the figures (``finish``): the finishing script puts
them on the call's record and adds them to the tenant's hour in Redis
(``distributed/usage.py``); once written, this worker's ``/metrics`` counts them too.

The tenant is the one of the call's stored session id (``tenancy.tenant_of_session``), the
tool the id the dispatcher validated (``tool_label``): neither comes from the tool's caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolhub.core import CallResult, Progress
from toolhub.distributed.usage import CallUsage
from toolhub.executors.metered import Metered, output_bytes
from toolhub.tenancy import tenant_of_session
from workers.lifecycle.metrics import metrics, tool_label

__all__ = ["AttemptUsage"]


@dataclass(slots=True)
class AttemptUsage:
    tenant: str
    tool: str
    metered: Metered = field(default_factory=Metered)

    @classmethod
    def of(cls, message: dict[str, Any]) -> AttemptUsage:
        return cls(tenant_of_session(str(message["session_id"])), tool_label(message))

    def charge_output(self, item: Progress | CallResult) -> None:
        """Count ``item``'s output (from whichever thread publishes it: locked)."""
        size = output_bytes(item)
        if size:
            self.metered.meter.charge(output_bytes=size)

    def finish(self, result: CallResult) -> CallUsage:
        """The call's figures as its terminal is written: ``result``'s text counted, the wall
        time stopped (a terminal published again, after a Redis blip, keeps them)."""
        if self.metered.wall is None:
            self.charge_output(result)
        self.metered.stop()
        figures = self.metered.figures()
        return CallUsage(
            self.tenant,
            self.tool,
            figures.cpu_seconds,
            figures.wall_seconds,
            figures.peak_memory_bytes,
            figures.output_bytes,
        )

    def counted(self, usage: CallUsage, result: CallResult) -> None:
        """The terminal is written: count the call on this worker's ``/metrics``."""
        failed = result.error is not None and result.error.kind != "cancelled"
        metrics.usage.count(usage, failed=failed)
