"""Sessions for the adapter tests: one connected to the shared real stack (redis-server and
``toolhub worker`` processes, tests/fixtures_stack.py), one embedded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures_stack import shared_stack
from tests.integrations.support import CONNECTED_CONFIG, EMBEDDED_CONFIG, make_builder
from toolhub import Session


@pytest.fixture
def connected(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    """Calls validated here and run on the stack's workers."""
    url = shared_stack(request).url
    session = Session.connect(url, CONNECTED_CONFIG, tmp_path, builder=make_builder())
    yield session
    session.close()


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Session]:
    session = Session.embedded(
        EMBEDDED_CONFIG, tmp_path, state_dir=tmp_path / "state", builder=make_builder()
    )
    yield session
    session.close()
