"""A stdio MCP server on a fleet whose tool list changes: the worker running it publishes the
list again when the server says ``tools/list_changed``, and a dispatcher created afterwards
shows the new tool. Real redis-server, a real worker under its own operator policy (granting
the server by name), the real server started from a copy inside the workspace (it imports
only the MCP SDK, so it runs inside the session's sandbox)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.helpers import wait_until
from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import Stack
from toolhub import Session
from toolhub.distributed.mcp_tools import read
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore

pytestmark = pytest.mark.timeout(120)

SERVER = Path(__file__).with_name("changing_server.py")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(SERVER, ws / "changing_server.py")
    return ws


@pytest.fixture
def fleet(tmp_path: Path, workspace: Path) -> Iterator[Stack]:
    """One worker whose policy grants ``dyn``: the changing server in ``workspace``."""
    policy = tmp_path / "policy.yaml"
    command = ["python", str(workspace / "changing_server.py"), str(workspace)]
    policy.write_text(f"mcp_servers:\n  dyn:\n    command: {command}\n")
    stack = Stack(workers=1, env={"TOOLHUB_POLICY": str(policy)})
    try:
        yield stack.start()
    finally:
        stack.stop()


def test_a_changed_tool_list_is_published_again(fleet: Stack, workspace: Path) -> None:
    command = ["python", str(workspace / "changing_server.py"), str(workspace)]
    config = {**CONFIG, "mcp_servers": {"dyn": {"command": command}}}
    with Session.connect(fleet.url, config, workspace, builder=make_builder()) as session:
        assert "dyn__grow" in session.toolset.entries
        assert "dyn__extra_1" not in session.toolset.entries
        grown = session.call_sync("dyn__grow", {})
        assert not grown.is_error, grown.prompt_text
        store = RedisStore.from_settings(Settings.from_env(fleet.url))
        try:
            sid, config_hash = session.session_id, session.toolset.config.config_hash()

            def relisted() -> bool:
                found, _ = read(store.client, store.keys, None, sid, config_hash)
                names = {t["name"] for t in found.tools["dyn"]} if found else set()
                return "dyn__extra_1" in names

            wait_until(relisted, 30)
        finally:
            store.close()
    # A dispatcher of the session created now shows it (the worker still runs the server).
    with Session.connect(fleet.url, config, workspace, builder=make_builder()) as again:
        assert "dyn__extra_1" in again.toolset.entries
