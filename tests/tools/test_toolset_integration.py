"""The built-in tools inside a real tool set and Session: requirements, presets, renames,
definitions, and calls end to end (streaming, answers, background completion, use_tool)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhub.core import CallResult, Progress
from toolhub.session import Session
from toolhub.tools import BUILTIN_TOOLS, CATALOG, DEFAULT_TOOL_IDS, PRESETS
from toolhub.toolset import ToolSetBuilder

TASK_TOOLS = [{"id": "Main:task_output"}, {"id": "Main:wait_tasks"}, {"id": "Main:kill_task"}]


@pytest.fixture(scope="module")
def builder() -> ToolSetBuilder:
    return ToolSetBuilder(CATALOG, plugins=False)


def categories(builder: ToolSetBuilder, tools: list[dict[str, Any]]) -> list[tuple[str, str]]:
    report = builder.validate({"tools": tools})
    return [(v.tool, v.category) for v in report.violations]


def test_default_tool_set_is_valid_and_complete(builder: ToolSetBuilder) -> None:
    assert builder.validate(None).ok
    assert builder.validate({"tools": [{"id": i} for i in DEFAULT_TOOL_IDS]}).ok
    assert not any(i.startswith("Codex:") for i in DEFAULT_TOOL_IDS)
    ids = {t.fq_id() for t in BUILTIN_TOOLS}
    assert set(DEFAULT_TOOL_IDS) <= ids
    assert all(pin in ids for pin in PRESETS["legacy-1"])


def test_bash_with_background_needs_task_tools(builder: ToolSetBuilder) -> None:
    found = categories(builder, [{"id": "Main:bash"}])
    assert ("Main:bash", "requirements") in found
    quiet = [{"id": "Main:bash", "params": {"enabled_background": False}}]
    assert categories(builder, quiet) == []
    assert categories(builder, [{"id": "Main:bash"}, *TASK_TOOLS]) == []


def test_task_tools_need_background_bash(builder: ToolSetBuilder) -> None:
    tools = [{"id": "Main:bash", "params": {"enabled_background": False}}, *TASK_TOOLS]
    found = categories(builder, tools)
    assert {t for t, c in found if c == "requirements"} == {
        "Main:task_output",
        "Main:wait_tasks",
        "Main:kill_task",
    }


def test_edit_needs_read_and_plan_tools_need_each_other(builder: ToolSetBuilder) -> None:
    assert ("Main:edit_file", "requirements") in categories(builder, [{"id": "Main:edit_file"}])
    assert categories(builder, [{"id": "Main:edit_file"}, {"id": "Main:read_file"}]) == []
    assert ("Main:enter_plan_mode", "requirements") in categories(
        builder, [{"id": "Main:enter_plan_mode"}]
    )
    assert ("Main:exit_plan_mode", "requirements") in categories(
        builder, [{"id": "Main:exit_plan_mode"}]
    )


def test_main_and_codex_file_tools_conflict(builder: ToolSetBuilder) -> None:
    found = categories(
        builder, [{"id": "Main:read_file"}, {"id": "Codex:read_file", "name": "codex_read"}]
    )
    assert any(c == "variant_conflict" for _, c in found)
    codex = [{"id": f"Codex:{t}"} for t in ("apply_patch", "read_file", "list_dir", "grep_files")]
    assert categories(builder, codex) == []


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    ws = tmp_path / "ws"
    ws.mkdir()
    s = Session.embedded(workspace=ws, state_dir=tmp_path / "state", session_id="t1")
    yield s
    s.close()


def test_definitions_render_client_names(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    config = {
        "tools": [
            {"id": "Main:read_file", "name": "view", "rename": {"offset": "start"}},
            {"id": "Main:edit_file", "name": "patch_text", "rename": {"replace_all": "all"}},
            {"id": "Main:bash", "name": "sh", "rename": {"is_background": "bg"}},
            {"id": "Main:task_output", "name": "peek"},
            {"id": "Main:wait_tasks"},
            {"id": "Main:kill_task", "name": "stop"},
        ]
    }
    with Session.embedded(config, workspace=ws, state_dir=tmp_path / "st") as s:
        defs = {d["function"]["name"]: d["function"] for d in s.definitions()}
        assert "`start`" in defs["view"]["description"]
        assert "`all`" in defs["patch_text"]["description"]
        assert "`view`" in defs["patch_text"]["description"]
        bash = defs["sh"]
        assert "`bg`" in bash["description"] and "`peek`" in bash["description"]
        assert "`stop`" in bash["description"]
        assert "bg" in bash["parameters"]["properties"]
        (ws / "long.txt").write_text("".join(f"{n}\n" for n in range(3000)))
        res = s.call_sync("view", {"path": "long.txt"})
        assert "`start`=2001" in res.prompt_text


def test_legacy_preset_switches_behavior(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    with Session.embedded({"preset": "legacy-1"}, workspace=ws, state_dir=tmp_path / "s") as s:
        assert s.call_sync("read_file", {"path": "a.txt"}).prompt_text.split("\n")[1] == (
            "     2→two"
        )
    with Session.embedded(None, workspace=ws, state_dir=tmp_path / "c") as s:
        assert s.call_sync("read_file", {"path": "a.txt"}).prompt_text.split("\n")[1] == (
            "       two"
        )


def test_bash_streams_through_the_session(session: Session) -> None:
    items = list(session.stream_sync("bash", {"command": "echo a; echo b", "description": "x"}))
    progress = [i for i in items if isinstance(i, Progress)]
    result = items[-1]
    assert isinstance(result, CallResult) and result.error is None
    assert "".join(p.payload["delta"] for p in progress) == "a\nb\n"
    assert result.prompt_text.startswith("exit: 0\na\nb")


def test_ask_user_round_trip_through_session(session: Session) -> None:
    stream = session.stream_sync(
        "ask_user", {"questions": [{"question": "Proceed?"}]}, call_id="ask-9"
    )
    first = next(stream)
    assert isinstance(first, Progress) and first.subkind == "input_required"
    assert session.answer("ask-9", ["yes"]) is True
    result = list(stream)[-1]
    assert result.prompt_text == "Q: Proceed?\nA: yes"


def test_background_completion_reported_once_in_prompt_text(session: Session) -> None:
    started = session.call_sync(
        "bash", {"command": "echo bg-out", "description": "x", "is_background": True}
    )
    task_id = started.output.value["task_id"]
    time.sleep(0.5)
    texts = [session.call_sync("list_dir", {}).prompt_text for _ in range(3)]
    reminded = [t for t in texts if f'Background task "{task_id}"' in t]
    assert len(reminded) == 1 and "<system-reminder>" in reminded[0]


def test_use_tool_and_search_tool_reach_external_tools(session: Session) -> None:
    session.register_external(
        "clock__now",
        "Tell the current time in a time zone.",
        {"type": "object", "properties": {"tz": {"type": "string"}}},
        lambda args, ctx: f"time in {args.get('tz')}: 12:00",
    )
    found = session.call_sync("search_tool", {"query": "current time"})
    assert "clock__now" in found.prompt_text
    res = session.call_sync("use_tool", {"tool_name": "clock__now", "tool_input": '{"tz": "UTC"}'})
    assert res.error is None and "time in UTC: 12:00" in res.prompt_text
    native = session.call_sync("use_tool", {"tool_name": "read_file", "tool_input": {}})
    assert native.error is not None and "call `read_file` directly" in native.prompt_text


def test_image_reaches_the_call_result_as_a_content_block(session: Session) -> None:
    from tests.tools.test_read_file import PNG

    (session.workspace / "dot.png").write_bytes(PNG)
    res = session.call_sync("read_file", {"path": "dot.png"})
    (block,) = res.content
    assert block.type == "image" and block.mime_type == "image/png"
    assert "[image dot.png: image/png" in res.prompt_text
