"""The executors the contract tests run against. Each param yields a factory
``make(config=None, *, workspace) -> Session``; sessions are closed after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhub import Session

SessionFactory = Callable[..., Session]


def _embedded(tmp_path: Path) -> SessionFactory:
    def make(config: Any = None, *, workspace: Path | None = None, session_id: str | None = None):
        return Session.embedded(
            config,
            workspace or tmp_path / "ws",
            session_id=session_id,
            state_dir=tmp_path / "state" / (session_id or "default"),
        )

    return make


def _distributed(tmp_path: Path, request: pytest.FixtureRequest) -> SessionFactory:
    from tests.fixtures_stack import shared_stack

    url = shared_stack(request).url

    def make(config: Any = None, *, workspace: Path | None = None, session_id: str | None = None):
        return Session.connect(url, config, workspace or tmp_path / "ws", session_id=session_id)

    return make


EXECUTORS: dict[str, Callable[[Path, pytest.FixtureRequest], SessionFactory]] = {
    "embedded": lambda tmp_path, request: _embedded(tmp_path),
    "distributed": _distributed,
}


@pytest.fixture(params=list(EXECUTORS))
def session_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionFactory]:
    (tmp_path / "ws").mkdir()
    opened: list[Session] = []
    build = EXECUTORS[request.param](tmp_path, request)

    def make(*args: Any, **kwargs: Any) -> Session:
        session = build(*args, **kwargs)
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()
