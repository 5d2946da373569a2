"""The tasks extension's wire vocabulary (``io.modelcontextprotocol/tasks``, SEP-2663): its
request params, the server's task policy, whether a request's client declared the extension,
who is asking, and the small shapes a task answer is drawn with.

``principal_of`` is the boundary of a task's ownership: every ``tasks/*`` request is checked
against the principal that made the task, so a task of another tenant or key is "not found".
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from toolhub.http_guard import principal_in

from .elicit import questions_message, questions_schema

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
MISSING_CAPABILITY = -32021
POLL_INTERVAL_MS = 500
INPUT_KEY = "ask_user"


class TaskParams(types.RequestParams):
    model_config = ConfigDict(populate_by_name=True, extra="allow")

    task_id: str = Field(alias="taskId")
    request_state: str | None = Field(default=None, alias="requestState")


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


def task_policy() -> tuple[str, float, float]:
    """(``auto``/``always``/``never``, seconds before a call becomes a task, TTL seconds)."""
    mode = os.environ.get("TOOLHUB_MCP_TASKS", "auto").strip().lower() or "auto"
    if mode not in ("auto", "always", "never"):
        mode = "auto"
    after = float(os.environ.get("TOOLHUB_MCP_TASK_AFTER_S", "1.0"))
    ttl = float(os.environ.get("TOOLHUB_MCP_TASK_TTL_S", "3600"))
    return mode, after, ttl


def declares_tasks(ctx: ServerRequestContext[Any]) -> bool:
    """Whether this request's client declared the extension (2026-07-28 requests carry their
    capabilities; a legacy connection never gets a task)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    extensions = getattr(caps, "extensions", None) or {}
    return TASKS_EXTENSION in extensions


def principal_of(ctx: ServerRequestContext[Any]) -> str:
    """Who is asking: over HTTP the principal the ``Guard`` found (``tenant/key id``: a key's
    id or ``token-N``, never the credential itself); over stdio the one client of the
    process."""
    scope = getattr(ctx.request, "scope", None)
    if scope is None:
        return "stdio"
    found = principal_in(scope)
    return str(found) if found is not None else "anonymous"


def iso_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_not_found() -> MCPError:
    return MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")


def elicitation_request(questions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": questions_message(questions),
            "requestedSchema": questions_schema(questions),
        },
    }
