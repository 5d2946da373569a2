"""The Celery tasks. Each checks the message's fleet signature and age (``refusals.py``) before
anything else. A call (``toolhub.execute``, ``toolhub.background``) is then handed to the
worker runtime, and refused after all when its claim finds its run finished (``replayed``);
none returns anything through Celery (``ignore_result``): results travel on toolhub's own
channel. What Celery (and so Flower) is told of a call comes last, once its record is written
(``outcomes.py``): SUCCESS, FAILURE with the error kind, or REVOKED. ``toolhub.mcp_tools``
asks for the tools of a session's stdio MCP servers (``mcp_tools.py``). A call that will start
at once is claimed as its message is received (``receipt_claims.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery, Task
from celery.signals import task_received

from toolhub.distributed.celery_app import BACKGROUND_TASK, EXECUTE_TASK, MCP_TOOLS_TASK
from toolhub.distributed.evalsha import hold_connections
from toolhub.errors import ErrorCode
from toolhub.logs import call_context
from toolhub.tracing.worker import delivered
from workers.lifecycle.metrics import tool_label

from .background import run_background
from .execute import run_call
from .mcp_tools import answer_request
from .outcomes import Ended, report
from .refusals import REFUSED, REPLAYED, Refusals
from .runtime import WorkerRuntime

TASK_OPTIONS: dict[str, Any] = {
    "ignore_result": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
}

Body = Callable[[WorkerRuntime, dict[str, Any]], Ended]


def register_tasks(
    app: Celery, runtime: Callable[[], WorkerRuntime], refusals: Callable[[], Refusals]
) -> None:
    """Register ``toolhub.execute``, ``toolhub.background`` and ``toolhub.mcp_tools``;
    ``runtime`` and ``refusals`` return the process's ``WorkerRuntime`` and ``Refusals``
    (created on first use)."""
    tasks: dict[str, Task] = {}

    def run(name: str, body: Body, message: dict[str, Any]) -> str:
        hold_connections()  # a pool thread: it claims and finishes calls all its life
        with (
            call_context(message["call_id"], message.get("session_id"), tool_label(message)),
            delivered(tasks[name].request, message),  # the call's trace, from the headers
        ):
            gate, queue = refusals(), _queue(tasks[name])
            if gate.admit(name, message, queue):
                with runtime().level_gate.running(_priority(tasks[name])):
                    ended = body(runtime(), message)
                if ended.said == REPLAYED:  # the claim found the run finished: a replay
                    gate.replay(message, queue)
                    ended = Ended.custom(REFUSED, ErrorCode.MESSAGE_REFUSED)
            else:
                runtime().receipts.discard(runtime(), message["call_id"])
                ended = Ended.custom(REFUSED, ErrorCode.MESSAGE_REFUSED)
        return report(tasks[name], ended)  # raises Ignore for a failed or cancelled call

    def execute(**message: Any) -> str:
        return run(EXECUTE_TASK, run_call, message)

    def background(**message: Any) -> str:
        return run(BACKGROUND_TASK, run_background, message)

    def mcp_tools(**message: Any) -> str:
        """A dispatcher asks for the tools of a session's stdio MCP servers: no call, no
        record; the answer is the published list (``mcp_tools.py``)."""
        if not refusals().admit(MCP_TOOLS_TASK, message, _queue(tasks[MCP_TOOLS_TASK])):
            return REFUSED
        answer_request(runtime().toolsets, message["session_id"], message["config_hash"])
        return "published"

    def received(sender: Any = None, request: Any = None, **_: Any) -> None:
        """Celery's consumer received a message: claim it now if it starts at once."""
        threads = int(getattr(getattr(sender, "pool", None), "limit", 0) or 0)
        if request is not None and threads > 0:
            runtime().receipts.received(runtime(), refusals(), request, threads)

    task_received.connect(received, weak=False)
    tasks[EXECUTE_TASK] = app.task(name=EXECUTE_TASK, **TASK_OPTIONS)(execute)
    tasks[BACKGROUND_TASK] = app.task(name=BACKGROUND_TASK, **TASK_OPTIONS)(background)
    tasks[MCP_TOOLS_TASK] = app.task(name=MCP_TOOLS_TASK, **TASK_OPTIONS)(mcp_tools)


def _priority(task: Task) -> object:
    """The kombu priority of the running message: its fair-dispatch level (``level_gate.py``)."""
    return (task.request.delivery_info or {}).get("priority")


def _queue(task: Task) -> str:
    """The queue the running message came from (for the dead-letter entry of a refusal)."""
    info = task.request.delivery_info or {}
    return str(info.get("routing_key") or "?")
