"""Put the Redis-backed resources into a session's container (dispatcher or worker)."""

from __future__ import annotations

from celery import Celery
from redis import Redis

from toolhub.backends.interaction import AnswerBox
from toolhub.backends.tasks import BackgroundTasks
from toolhub.core import Container

from .answers import RedisAnswerBox
from .background import RedisBackgroundTasks
from .keys import Keys
from .settings import Settings


def install_distributed_resources(
    container: Container, redis: Redis, app: Celery, settings: Settings, *, session_id: str
) -> None:
    """Replace the per-process background tasks and answer box with Redis ones, so that
    ``task_output``/``wait_tasks``/``kill_task`` and ``Session.answer`` work from any dispatcher
    and any worker. Install the local resources (workspace, process runner) first."""
    container.insert(RedisBackgroundTasks(redis, app, settings, session_id), BackgroundTasks)
    container.insert(
        RedisAnswerBox(redis, Keys(settings.prefix), session_id, settings.record_ttl_seconds),
        AnswerBox,
    )
