"""Suite-wide setup: the third-party clients' environments start building at once, in the
background (``tests/client_venvs.py``), instead of when the first test that needs each runs."""

from __future__ import annotations

import pytest

from tests.client_venvs import prepare_in_background


def pytest_sessionstart(session: pytest.Session) -> None:
    prepare_in_background()
