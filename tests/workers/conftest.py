"""The workers suite mirrors ``workers/`` (one directory per room, one file per module). Tests
that need a fleet run on the distributed suite's real stack (redis-server and two ``toolhub
worker`` processes) and its fixtures; tests of one module's logic use a redis-server of their
own (``private_redis``), where no worker claims or sweeps what they write."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest

from tests.distributed.conftest import connect, live, store
from toolhub.distributed.celery_app import make_celery
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer
from workers.calls.runtime import WorkerRuntime

__all__ = [
    "bare_settings",
    "bare_store",
    "connect",
    "live",
    "private_redis",
    "runtime",
    "store",
]


@pytest.fixture(scope="session")
def private_redis() -> Iterator[RedisServer]:
    """A redis-server no worker of the suite consumes."""
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def bare_settings(private_redis: RedisServer) -> Settings:
    """Settings on ``private_redis`` under a prefix of this test's own."""
    settings = Settings.from_env(private_redis.url)
    return dataclasses.replace(settings, prefix=f"t{uuid.uuid4().hex[:8]}:")


@pytest.fixture
def bare_store(bare_settings: Settings) -> Iterator[RedisStore]:
    redis_store = RedisStore.from_settings(bare_settings)
    yield redis_store
    redis_store.close()


@pytest.fixture
def runtime(bare_settings: Settings) -> Iterator[WorkerRuntime]:
    """A worker runtime on ``private_redis`` (no worker process: its tasks run nowhere)."""
    worker_runtime = WorkerRuntime(bare_settings, make_celery(bare_settings, main="t"), None)
    yield worker_runtime
    worker_runtime.close()
