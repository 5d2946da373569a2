"""The OTLP metrics, beside the Prometheus ones (which stay as they are).

``gen_ai.execute_tool.duration`` is the GenAI conventions' histogram of a tool call's
duration (seconds; the caller's ``execute_tool`` span's, as the conventions ask); toolhub adds
the queue wait of a distributed call and the start of a command (its cgroup, sandbox and
process). They go wherever the global meter provider sends them: ``setup_from_env`` installs
an OTLP one in toolhub's processes.
"""

from __future__ import annotations

import functools
from typing import Any

from .state import meter

TOOL_DURATION = "gen_ai.execute_tool.duration"
QUEUE_WAIT = "toolhub.call.queue_wait.duration"
SANDBOX_START = "toolhub.command.start.duration"


@functools.cache
def _histograms() -> dict[str, Any]:
    found = meter()
    if found is None:
        return {}
    return {
        TOOL_DURATION: found.create_histogram(TOOL_DURATION, unit="s", description="Tool call"),
        QUEUE_WAIT: found.create_histogram(
            QUEUE_WAIT, unit="s", description="From a call's enqueue to its claim by a worker"
        ),
        SANDBOX_START: found.create_histogram(
            SANDBOX_START, unit="s", description="Starting a command: cgroup, sandbox, process"
        ),
    }


def record(name: str, seconds: float, attributes: dict[str, Any]) -> None:
    histogram = _histograms().get(name)
    if histogram is not None:
        histogram.record(max(seconds, 0.0), attributes)
