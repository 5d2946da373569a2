"""A second, independent implementation of the tasks extension's client side: FastMCP 4's
client with ``fastmcp-tasks`` (its own ``tasks/get``/``cancel`` models and poll loop, nothing
of toolhub's), in its own virtualenv, against ``toolhub mcp`` over streamable HTTP."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client_venvs import client_python
from tests.gateway.support import make_builder
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

#: The third-party clients these tests run (built in the background: tests/conftest.py).
NEEDS_CLIENTS = ("fastmcp-tasks",)

pytestmark = pytest.mark.timeout(600)

CLIENT = Path(__file__).with_name("fastmcp_tasks_client.py")


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "ws").mkdir()
    session = Session.embedded(
        None, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    )
    with session, ThreadedServer(http_app(session, host="127.0.0.1", token="tok")) as server:
        yield f"{server.url}/mcp"


def test_fastmcp_tasks_client_runs_polls_and_cancels_toolhub_tasks(url: str) -> None:
    python = client_python("fastmcp-tasks")
    done = subprocess.run(
        [str(python), str(CLIENT), url, "tok"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["slept"] == {"slept": 1.5} and seen["slept_error"] is False
    assert seen["task_id"].startswith("task_")
    assert seen["status"] == "working"
    assert seen["after_cancel"] == "cancelled"
