"""Background tasks (``bash`` with ``is_background``): the protocol, and its backends side by side.

``base.BackgroundTasks`` is what the tools use (``task_output``, ``wait_tasks``, ``kill_task``);
``local.LocalBackgroundTasks`` runs commands in this process, ``redis.RedisBackgroundTasks``
(imported from its module) makes each a durable call record run by the fleet's holders.
"""

from .base import (
    BackgroundTasks,
    KillOutcome,
    TaskSnapshot,
    TasksPerSession,
    TaskStatus,
    WaitMode,
    check_room,
)
from .local import LocalBackgroundTasks

__all__ = [
    "BackgroundTasks",
    "KillOutcome",
    "LocalBackgroundTasks",
    "TaskSnapshot",
    "TaskStatus",
    "TasksPerSession",
    "WaitMode",
    "check_room",
]
