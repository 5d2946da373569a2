"""The OpenCode tools and presets under every executor (see conftest.py): the `opencode` preset
edits, reads, searches and runs commands with OpenCode's argument names; params and renames
reach the worker; the todo list persists between calls; paths outside the workspace are
refused; an explicit entry overrides a preset's on either executor."""

from __future__ import annotations

from pathlib import Path

from toolhub import CallResult, Progress

OPENCODE = {
    "preset": "opencode",
    "tools": [
        {"id": "OpenCode:edit", "rename": {"replaceAll": "all"}},
        {"id": "OpenCode:bash", "params": {"max_timeout_ms": 400}},
    ],
}


def test_opencode_tools_edit_read_search_and_run(session_factory, tmp_path: Path):
    ws = tmp_path / "ws"
    session = session_factory(OPENCODE)
    names = [d["function"]["name"] for d in session.definitions()]
    assert names == ["bash", "read", "edit", "write", "grep", "glob", "todowrite", "skill"]
    wrote = session.call_sync("write", {"filePath": "src/m.py", "content": "a = 1\nb = 1\n"})
    assert not wrote.is_error and (ws / "src/m.py").read_text() == "a = 1\nb = 1\n"
    read = session.call_sync("read", {"filePath": "src/m.py"})
    assert read.prompt_text.startswith("<path>src/m.py</path>"), read.prompt_text
    twice = session.call_sync("edit", {"filePath": "src/m.py", "oldString": "1", "newString": "2"})
    assert twice.output.value["status"] == "multiple_matches" and "`all`" in twice.prompt_text
    done = session.call_sync(
        "edit", {"filePath": "src/m.py", "oldString": "1", "newString": "2", "all": True}
    )
    assert not done.is_error and (ws / "src/m.py").read_text() == "a = 2\nb = 2\n"
    found = session.call_sync("grep", {"pattern": "b =", "include": "*.py"})
    assert "src/m.py:2:b = 2" in found.prompt_text
    globbed = session.call_sync("glob", {"pattern": "*.py"})
    assert globbed.output.value["files"] == ["src/m.py"]
    items = list(
        session.stream_sync("bash", {"command": "echo hi", "description": "t", "workdir": "src"})
    )
    assert isinstance(items[-1], CallResult) and "hi" in items[-1].prompt_text
    assert all(isinstance(i, Progress) for i in items[:-1])
    slow = session.call_sync("bash", {"command": "sleep 5", "description": "t", "timeout": 9000})
    assert slow.output.value["killed"] == "timeout"  # max_timeout_ms reached the executor


def test_opencode_todos_persist_between_calls(session_factory):
    session = session_factory({"preset": "opencode"})
    todo = {"id": "1", "content": "ship", "status": "pending", "priority": "high"}
    first = session.call_sync("todowrite", {"todos": [todo]})
    assert not first.is_error and "(high)" in first.prompt_text
    dupe = session.call_sync("todowrite", {"todos": [todo, todo]})
    assert dupe.output.value["status"] == "duplicate_id"
    assert [t["priority"] for t in dupe.output.value["todos"]] == []
    second = session.call_sync("todowrite", {"todos": [{**todo, "status": "completed"}]})
    assert "[x] 1. ship (high)" in second.prompt_text


def test_opencode_paths_outside_the_workspace_are_refused(session_factory, tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    session = session_factory({"preset": "opencode"})
    for name, args in (
        ("read", {"filePath": "../outside.txt"}),
        ("write", {"filePath": str(outside), "content": "x"}),
        ("edit", {"filePath": "../outside.txt", "oldString": "keep", "newString": "lose"}),
        ("grep", {"pattern": "keep", "path": ".."}),
        ("bash", {"command": "pwd", "description": "t", "workdir": ".."}),
    ):
        result = session.call_sync(name, args)
        assert result.error is not None and result.error.kind == "permission_denied", name
    assert outside.read_text() == "keep me\n"


def test_a_coding_preset_override_reaches_the_executor(session_factory):
    config = {"preset": "coding", "tools": [{"id": "Main:bash", "params": {"max_timeout_ms": 300}}]}
    session = session_factory(config)
    slow = session.call_sync("run_terminal_command", {"command": "sleep 5", "description": "t"})
    assert slow.output.value["killed"] == "timeout", slow.prompt_text
