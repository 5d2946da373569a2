"""Suite-wide setup: when the tests collected include one that needs a third-party client, the
clients it names (``NEEDS_CLIENTS``) start building at once, in the background
(``tests/client_venvs.py``), instead of when the first test that needs each runs; a run without
such a test builds none.

Process-wide settings a test may change in-process go back after it: which ``${VAR}``s the
process may expand (a worker runtime or ``toolhub mcp`` built in the test process restricts it
to its policy's ``env_vars``; the next test file in the same process must not inherit that).

The suite runs as root on the development machine: every worker, ``toolhub up`` and embedded
``toolhub serve`` it starts inherits ``TOOLHUB_ALLOW_ROOT=1`` from here (they refuse to start as
root without it; ``tests/sandbox/test_root.py`` shows the refusal)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import client_venvs
from toolhub import env_refs

os.environ.setdefault("TOOLHUB_ALLOW_ROOT", "1")


def pytest_collection_finish(session: pytest.Session) -> None:
    modules = {getattr(item, "module", None) for item in session.items}
    needed = {name for module in modules for name in getattr(module, "NEEDS_CLIENTS", ())}
    if needed:
        client_venvs.prepare_in_background(needed)


@pytest.fixture(autouse=True)
def _expansion_as_a_fresh_process() -> Iterator[None]:
    yield
    env_refs.restrict(None)
