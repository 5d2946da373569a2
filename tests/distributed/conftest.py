"""Fixtures of the distributed suite: the shared real stack (redis-server + 2 ``toolhub
worker`` processes, see ``tests/fixtures_stack.py``), healed before every test, dispatcher
sessions on it, and a bare redis-server no worker serves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import Stack, shared_stack
from toolhub import Session
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer


@pytest.fixture(scope="module")
def bare_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of the test module's own that no worker serves or sweeps."""
    server = RedisServer(data_dir=tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Stack:
    """The shared stack with every worker alive."""
    return shared_stack(request)


@pytest.fixture
def store(live: Stack) -> Iterator[RedisStore]:
    redis_store = RedisStore.from_settings(Settings.from_env(live.url))
    yield redis_store
    redis_store.close()


SessionMaker = Callable[..., Session]


@pytest.fixture
def connect(live: Stack, tmp_path: Path) -> Iterator[SessionMaker]:
    opened: list[Session] = []

    def make(config: Any = None, **kwargs: Any) -> Session:
        workspace = kwargs.pop("workspace", tmp_path / "ws")
        Path(workspace).mkdir(parents=True, exist_ok=True)
        session = Session.connect(
            live.url, config or CONFIG, workspace, builder=make_builder(), **kwargs
        )
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()
