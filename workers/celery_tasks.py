"""The Celery tasks. Both only unpack the message and hand it to the worker runtime; neither
returns anything through Celery (``ignore_result``): results travel on toolhub's own channel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery

from toolhub.distributed.celery_app import BACKGROUND_TASK, EXECUTE_TASK
from toolhub.logs import call_context

from .background import run_background
from .calls import run_call
from .metrics import tool_label
from .runtime import WorkerRuntime

TASK_OPTIONS: dict[str, Any] = {
    "ignore_result": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
}


def register_tasks(app: Celery, runtime: Callable[[], WorkerRuntime]) -> None:
    """Register ``toolhub.execute`` and ``toolhub.background``; ``runtime`` returns the
    process's ``WorkerRuntime`` (created on first use)."""

    def execute(**message: Any) -> str:
        with call_context(message["call_id"], message.get("session_id"), tool_label(message)):
            return run_call(runtime(), message)

    def background(**message: Any) -> str:
        with call_context(message["call_id"], message.get("session_id"), tool_label(message)):
            return run_background(runtime(), message)

    app.task(name=EXECUTE_TASK, **TASK_OPTIONS)(execute)
    app.task(name=BACKGROUND_TASK, **TASK_OPTIONS)(background)
