"""Span and metric attribute names: the OpenTelemetry GenAI conventions' where they define
one (the ``execute_tool`` span and the ``gen_ai.execute_tool.duration`` metric), toolhub's own
under ``toolhub.*`` for the rest.

No attribute, event or span name carries a call's arguments, output or progress payloads:
those may hold secrets, and traces leave the fleet for whoever runs the collector.
"""

from __future__ import annotations

from toolhub.core import CallResult

OPERATION = "gen_ai.operation.name"
EXECUTE_TOOL = "execute_tool"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"

TOOL_ID = "toolhub.tool.id"  # the canonical name (the client name is gen_ai.tool.name)
SESSION = "toolhub.session.id"
TENANT = "toolhub.tenant"
ATTEMPT = "toolhub.call.attempt"
CLAIM = "toolhub.claim.action"
QUEUE = "toolhub.queue"
QUEUE_WAIT = "toolhub.call.queue_wait"  # seconds, enqueue to claim (without phase spans)
PROGRESS_KIND = "toolhub.progress.kind"
PROGRESS_DROPPED = "toolhub.progress.dropped"

#: ``gen_ai.tool.type`` of a built-in or plugin tool, and of a tool an external source serves.
FUNCTION = "function"
EXTENSION = "extension"


def error_type(result: CallResult) -> str | None:
    """toolhub's error kind of a failed result (a ``custom`` error's code), else None."""
    error = result.error
    if error is None:
        return None
    return error.code or error.kind.value
