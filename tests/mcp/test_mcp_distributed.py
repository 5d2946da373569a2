"""An MCP server's tools in a distributed session (``Session.connect``): listed, validated and
called like any tool while the built-in calls of the same session run on the workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import shared_stack
from toolhub import Session

pytestmark = pytest.mark.timeout(120)


def test_time_server_in_a_distributed_session(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stack = shared_stack(request)
    config = {
        **CONFIG,
        "mcp_servers": {"time": {"command": ["python", "-m", "mcp_server_time"]}},
    }
    with Session.connect(stack.url, config, tmp_path, builder=make_builder()) as session:
        assert "time__get_current_time" in session.toolset.entries
        now = session.call_sync("time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error and now.output is not None
        assert now.output.value["timezone"] == "UTC"
        ticks = session.call_sync("ticks", {"n": 2})
        assert not ticks.is_error and ticks.output is not None
        assert ticks.output.value["worker_pid"] != 0, "ran on a worker"
    assert "time__get_current_time" not in session.toolset.entries
