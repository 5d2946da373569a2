"""The Celery tasks. Both check the message's fleet signature and age (``refusals.py``), then
hand it to the worker runtime, and refuse it after all when its claim finds its run finished
(``replayed``); neither returns anything through Celery (``ignore_result``): results travel
on toolhub's own channel. What Celery (and so Flower) is told of the call comes last, once its
record is written (``outcomes.py``): SUCCESS, FAILURE with the error kind, or REVOKED."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery, Task

from toolhub.distributed.celery_app import BACKGROUND_TASK, EXECUTE_TASK
from toolhub.errors import ErrorCode
from toolhub.logs import call_context

from .background import run_background
from .calls import run_call
from .metrics import tool_label
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
    """Register ``toolhub.execute`` and ``toolhub.background``; ``runtime`` and ``refusals``
    return the process's ``WorkerRuntime`` and ``Refusals`` (created on first use)."""
    tasks: dict[str, Task] = {}

    def run(name: str, body: Body, message: dict[str, Any]) -> str:
        with call_context(message["call_id"], message.get("session_id"), tool_label(message)):
            gate, queue = refusals(), _queue(tasks[name])
            if gate.admit(name, message, queue):
                ended = body(runtime(), message)
                if ended.said == REPLAYED:  # the claim found the run finished: a replay
                    gate.replay(message, queue)
                    ended = Ended.custom(REFUSED, ErrorCode.MESSAGE_REFUSED)
            else:
                ended = Ended.custom(REFUSED, ErrorCode.MESSAGE_REFUSED)
        return report(tasks[name], ended)  # raises Ignore for a failed or cancelled call

    def execute(**message: Any) -> str:
        return run(EXECUTE_TASK, run_call, message)

    def background(**message: Any) -> str:
        return run(BACKGROUND_TASK, run_background, message)

    tasks[EXECUTE_TASK] = app.task(name=EXECUTE_TASK, **TASK_OPTIONS)(execute)
    tasks[BACKGROUND_TASK] = app.task(name=BACKGROUND_TASK, **TASK_OPTIONS)(background)


def _queue(task: Task) -> str:
    """The queue the running message came from (for the dead-letter entry of a refusal)."""
    info = task.request.delivery_info or {}
    return str(info.get("routing_key") or "?")
