"""MCP servers as external tool sources: ``mcp-server-time`` from PyPI and a server whose tool
list changes, attached through a session config and called through toolhub."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.support import make_builder
from toolhub import CallResult, Progress, Session
from toolhub.sources.mcp_client import attach_mcp_servers
from toolhub.sources.mcp_naming import client_name

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
TIME = {"time": {"command": ["python", "-m", "mcp_server_time", "--local-timezone", "UTC"]}}


def changing(tmp_path: Path) -> dict[str, Any]:
    return {
        "command": [sys.executable, "-m", "tests.sources.changing_server", str(tmp_path)],
        "env": {"PYTHONPATH": str(ROOT)},
    }


def open_session(tmp_path: Path, config: dict[str, Any]) -> Session:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return Session.embedded(config, workspace, state_dir=tmp_path / "state", builder=make_builder())


def test_time_server_tools_are_external_tools(tmp_path: Path) -> None:
    with open_session(tmp_path, {"mcp_servers": TIME}) as session:
        names = [d["name"] for d in session.definitions("mcp")]
        assert {"time__get_current_time", "time__convert_time"} <= set(names)
        entry = session.toolset.entries["time__get_current_time"]
        assert entry.fq_id == "External:time__get_current_time" and entry.kind == "other"
        assert entry.handle.spec.source == {"mcp": "time"}

        now = session.call_sync("time__get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error, now.prompt_text
        assert now.output is not None and now.output.value["timezone"] == "Europe/Paris"
        assert "Europe/Paris" in now.prompt_text

        converted = asyncio.run(
            session.call(
                "time__convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            )
        )
        assert converted.output is not None
        assert (
            converted.output.value["target"]["datetime"].startswith(
                converted.output.value["source"]["datetime"][:10]
            )
            or "21:00" in converted.prompt_text
        )

        wrong = session.call_sync("time__get_current_time", {"timezone": "Mars/Olympus"})
        assert wrong.is_error and "Mars/Olympus" in wrong.prompt_text
    assert "time__get_current_time" not in session.toolset.entries, "closed session drops them"


def test_capability_filter_keeps_external_tools_to_mode_all(tmp_path: Path) -> None:
    config = {"mode": "read_only", "mcp_servers": TIME}
    with open_session(tmp_path, config) as session:
        assert not [d for d in session.definitions("mcp") if "__" in d["name"]]
        assert any("not shown" in w for w in session.warnings)


def test_baseline_wins_a_name_clash(tmp_path: Path) -> None:
    config = {
        "tools": [{"id": "Main:echo", "name": "time__get_current_time"}],
        "mcp_servers": TIME,
    }
    with open_session(tmp_path, config) as session:
        clash = session.call_sync("time__get_current_time", {"text": "mine"})
        assert clash.prompt_text == "echo: mine"
        assert "time__convert_time" in session.toolset.entries


def test_list_changed_progress_errors_and_cancel(tmp_path: Path) -> None:
    with open_session(tmp_path, {"mcp_servers": {"dyn": changing(tmp_path)}}) as session:
        names = set(session.toolset.entries)
        assert {"dyn__grow", "dyn__slow", "dyn__fail", "dyn__dotted_name"} <= names

        assert session.call_sync("dyn__grow").prompt_text == "added extra_1"
        deadline = time.monotonic() + 10
        while "dyn__extra_1" not in session.toolset.entries and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session.call_sync("dyn__extra_1", {"x": 1}).prompt_text.startswith("extra_1 called")

        items = list(session.stream_sync("dyn__slow", {"seconds": 0.3}))
        progress = [i for i in items if isinstance(i, Progress)]
        assert [p.text for p in progress][:2] == ["step 1", "step 2"]
        result = items[-1]
        assert isinstance(result, CallResult) and result.output is not None
        assert result.output.value == {"steps": 6}

        failed = session.call_sync("dyn__fail")
        assert failed.is_error and failed.error is not None
        assert failed.error.detail == "it broke"

        cancelled = asyncio.run(_cancel_after_first_progress(session))
        assert cancelled.error is not None and cancelled.error.kind == "cancelled"
        marker = tmp_path / "slow.cancelled"
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the MCP server saw notifications/cancelled"


async def _cancel_after_first_progress(session: Session) -> CallResult:
    result: CallResult | None = None
    async for item in session.stream("dyn__slow", {"seconds": 30}, call_id="slow-1"):
        if isinstance(item, Progress) and result is None:
            await session.cancel("slow-1")
        if isinstance(item, CallResult):
            result = item
    assert result is not None
    return result


def test_attach_to_a_toolset_and_unreachable_servers(tmp_path: Path) -> None:
    async def body() -> None:
        with open_session(tmp_path, {}) as session:
            connections = await attach_mcp_servers(
                session.toolset,
                {
                    "time": TIME["time"],
                    "gone": {"command": ["/nonexistent/mcp-server"]},
                    "bad__name": {"command": ["x"]},
                    "both": {"command": ["x"], "url": "http://127.0.0.1:9/mcp"},
                },
                timeout=20,
            )
            try:
                assert connections.tools("time") == ["time__convert_time", "time__get_current_time"]
                assert any("'gone'" in w for w in connections.warnings)
                assert any("'bad__name'" in w for w in connections.warnings)
                assert any("exactly one" in w for w in connections.warnings)
                result = await session.call("time__get_current_time", {"timezone": "UTC"})
                assert not result.is_error
            finally:
                await connections.aclose()
            assert "time__get_current_time" not in session.toolset.entries

    asyncio.run(body())


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("get_time", "srv__get_time"),
        ("dotted.name", "srv__dotted_name"),
        ("a__b", "srv__a_b"),
        ("_lead", "srv__lead"),
        ("x" * 100, "srv__" + "x" * 59),
        ("..", None),
    ],
)
def test_client_names(tool: str, expected: str | None) -> None:
    assert client_name("srv", tool) == expected


def test_mcp_tools_through_use_tool_and_search_tool(tmp_path: Path) -> None:
    config = {
        "tools": [{"id": "Main:use_tool"}, {"id": "Main:search_tool"}],
        "mcp_servers": TIME,
    }
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with Session.embedded(config, workspace, state_dir=tmp_path / "state") as session:
        found = session.call_sync("search_tool", {"query": "current time"})
        assert "time__get_current_time" in found.prompt_text
        used = session.call_sync(
            "use_tool",
            {"tool_name": "time__get_current_time", "tool_input": '{"timezone": "UTC"}'},
        )
        assert not used.is_error, used.prompt_text
        assert used.effective_tool_name == "time__get_current_time"
        assert '"timezone": "UTC"' in used.prompt_text
