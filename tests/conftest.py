"""Suite-wide setup: when the tests collected include one that needs a third-party client, the
clients it names (``NEEDS_CLIENTS``) start building at once, in the background
(``tests/client_venvs.py``), instead of when the first test that needs each runs; a run without
such a test builds none. The longest files are collected first (``LONGEST_FILES``).

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


#: The files whose tests take longest (20 s or more each on 2 cores: `make test`'s
#: ``--durations``), run first: xdist hands out one file at a time in collection order, so a
#: long file collected last would run alone at the end while the other processes sit idle.
LONGEST_FILES = (
    "tests/tracing/test_distributed_trace.py",
    "tests/distributed/test_chaos.py",
    "tests/workers/holder/test_server.py",
    "tests/cli/test_cli_approvals.py",
    "tests/gateway/test_gateway_fuzz.py",
    "tests/mcp/test_conformance.py",
    "tests/gateway/test_gateway_approvals.py",
    "tests/tools/test_file_tools_hostile.py",
    "tests/test_readme.py",
    "tests/workers/guards/test_sandboxing.py",
    "tests/distributed/test_signing.py",
    "tests/stack/test_stack_up.py",
    "tests/mcp/test_third_party_clients.py",
    "tests/sources/test_mcp_task_resume.py",
    "tests/observability/test_flower_outcomes.py",
    "tests/toolset/test_strict_definitions.py",
    "tests/cli/test_cli_demo.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_collection_finish(session: pytest.Session) -> None:
    modules = {getattr(item, "module", None) for item in session.items}
    needed = {name for module in modules for name in getattr(module, "NEEDS_CLIENTS", ())}
    if needed:
        client_venvs.prepare_in_background(needed)


@pytest.fixture(autouse=True)
def _expansion_as_a_fresh_process() -> Iterator[None]:
    yield
    env_refs.restrict(None)
