"""Suite-wide setup: the third-party clients' environments start building at once, in the
background (``tests/client_venvs.py``), instead of when the first test that needs each runs.

The suite runs as root on the development machine: every worker, ``toolhub up`` and embedded
``toolhub serve`` it starts inherits ``TOOLHUB_ALLOW_ROOT=1`` from here (they refuse to start as
root without it; ``tests/sandbox/test_root.py`` shows the refusal)."""

from __future__ import annotations

import os

import pytest

from tests.client_venvs import prepare_in_background

os.environ.setdefault("TOOLHUB_ALLOW_ROOT", "1")


def pytest_sessionstart(session: pytest.Session) -> None:
    prepare_in_background()
