"""MCP servers in a distributed session (``Session.connect``). A streamable-HTTP server's tools
are listed, validated and called like any tool while the built-in calls of the same session run
on the workers. A stdio server is refused: the dispatcher would start it on its own host (the
gateway's), so the config fails with a violation naming the server, and nothing starts."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import shared_stack
from toolhub import ConfigError, Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(120)

TOKEN = "remote-token"


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[str]:
    """Another toolhub serving the suite's test tools over MCP (streamable HTTP)."""
    (tmp_path / "remote").mkdir()
    session = Session.embedded(
        {"tools": [{"id": "Test:ticks"}]},
        tmp_path / "remote",
        state_dir=tmp_path / "remote-state",
        builder=make_builder(),
    )
    server = ThreadedServer(http_app(session, host="127.0.0.1", token=TOKEN))
    server.server.config.timeout_graceful_shutdown = 0.5
    with session, server:
        yield f"{server.url}/mcp"


def test_an_http_server_in_a_distributed_session(
    request: pytest.FixtureRequest, tmp_path: Path, remote: str
) -> None:
    stack = shared_stack(request)
    far = {"url": remote, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    config = {**CONFIG, "mcp_servers": {"far": far}}
    (tmp_path / "ws").mkdir()
    with Session.connect(stack.url, config, tmp_path / "ws", builder=make_builder()) as session:
        assert "far__ticks" in session.toolset.entries
        far_ticks = session.call_sync("far__ticks", {"n": 2})
        assert not far_ticks.is_error, far_ticks.prompt_text
        ticks = session.call_sync("ticks", {"n": 2})
        assert not ticks.is_error and ticks.output is not None
        assert ticks.output.value["worker_pid"] != 0, "ran on a worker"
    assert "far__ticks" not in session.toolset.entries


def test_a_stdio_server_is_refused_on_a_fleet(
    request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stack = shared_stack(request)
    marker = tmp_path / "started"
    config = {**CONFIG, "mcp_servers": {"local": {"command": ["touch", str(marker)]}}}
    with (
        caplog.at_level(logging.WARNING, "toolhub.assembly"),
        pytest.raises(ConfigError) as refused,
    ):
        Session.connect(stack.url, config, tmp_path, session_id="acme~s1", builder=make_builder())
    (violation,) = refused.value.violations
    assert violation.field_path == "mcp_servers.local.command"
    assert "'local'" in violation.message and "not yet supported on a fleet" in violation.message
    assert not marker.exists(), "nothing was started"
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("tenant acme" in line and "local" in line for line in logged)
    # The same session without it still runs on the workers.
    with Session.connect(stack.url, CONFIG, tmp_path, builder=make_builder()) as session:
        ticks = session.call_sync("ticks", {"n": 1})
        assert not ticks.is_error and ticks.output is not None
        assert ticks.output.value["worker_pid"] != 0
