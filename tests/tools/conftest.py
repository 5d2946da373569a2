"""Fixtures for the built-in tool tests: a fresh workspace and a harness around it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tools.harness import Harness


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def harness(ws: Path, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(ws, tmp_path / "session")
    yield h
    for value in h.container.values():
        close = getattr(value, "close", None)
        if callable(close):
            close()
