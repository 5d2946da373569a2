"""The Session contract, written once and run against every executor (see conftest.py)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from pathlib import Path

from toolhub import CallResult, Progress

FILES = {
    "tools": [
        {"id": "Main:read_file", "name": "view", "rename": {"path": "file", "limit": "max_lines"}},
        {"id": "Main:write_file"},
        {"id": "Main:edit_file"},
        {"id": "Main:list_dir"},
        {"id": "Main:todo_write"},
        {"id": "Main:bash", "params": {"enabled_background": False}},
    ]
}


def run(coro):
    return asyncio.run(coro)


def test_definitions_show_client_names(session_factory):
    session = session_factory(FILES)
    names = [d["function"]["name"] for d in session.definitions()]
    assert names[:2] == ["view", "write_file"] and "bash" in names
    view = session.definitions("anthropic")[0]
    assert "file" in view["input_schema"]["properties"]
    assert "path" not in view["input_schema"]["properties"]


def test_write_then_read_round_trip_with_renamed_params(session_factory, tmp_path: Path):
    session = session_factory(FILES)
    wrote = session.call_sync("write_file", {"path": "notes/a.txt", "content": "one\ntwo\n"})
    assert not wrote.is_error, wrote.prompt_text
    assert (tmp_path / "ws" / "notes" / "a.txt").read_text() == "one\ntwo\n"
    read = session.call_sync("view", {"file": "notes/a.txt"}, call_id="call-read-1")
    assert not read.is_error, read.prompt_text
    assert read.call_id == "call-read-1"
    assert "two" in read.prompt_text
    assert read.output.tool_id == "Main:read_file"


def test_async_call_and_stream_agree(session_factory):
    session = session_factory(FILES)

    async def go():
        result = await session.call("bash", {"command": "printf 'a\\nb\\n'", "description": "t"})
        items = [
            i async for i in session.stream("bash", {"command": "echo hi", "description": "t"})
        ]
        return result, items

    result, items = run(go())
    assert not result.is_error and "exit: 0" in result.prompt_text
    assert isinstance(items[-1], CallResult) and sum(isinstance(i, CallResult) for i in items) == 1
    assert all(isinstance(i, Progress) for i in items[:-1])
    assert "hi" in items[-1].prompt_text


def test_a_call_leaves_no_task_behind_on_the_callers_loop(session_factory):
    """A caller that keeps its own loop and runs each call to completion on it (or closes a
    stream early) finds nothing left on that loop: a stream left suspended at its result would
    be closed by the garbage collector through a task on a loop that no longer runs; its
    cleanup would never happen and asyncio would report a destroyed pending task."""
    session = session_factory(FILES)
    loop = asyncio.new_event_loop()

    async def first_item_then_close():
        items = session.stream("bash", {"command": "echo a; sleep 0.2; echo b", "description": "t"})
        first = await anext(items)
        await items.aclose()
        return first

    try:
        for command in ("echo one", "true"):
            call = session.call("bash", {"command": command, "description": "t"})
            result = loop.run_until_complete(call)
            assert not result.is_error, result.prompt_text
            gc.collect()
            assert not asyncio.all_tasks(loop), asyncio.all_tasks(loop)
        assert isinstance(loop.run_until_complete(first_item_then_close()), Progress)
        gc.collect()
        assert not asyncio.all_tasks(loop), asyncio.all_tasks(loop)
    finally:
        loop.close()


def test_invalid_arguments_name_the_client_field(session_factory):
    session = session_factory(FILES)
    result = session.call_sync("view", {"file": "a", "max_lines": "lots"})
    assert result.is_error and result.error.kind == "invalid_arguments"
    assert "`max_lines`" in result.error.detail and '"lots"' in result.error.detail


def test_a_refused_call_has_a_record(session_factory):
    """Refused before it ran, it is still a call its client can look up: failed, no attempt."""
    session = session_factory(FILES)
    result = session.call_sync("view", {"file": "a", "max_lines": "lots"}, call_id="refused-1")
    record = session.record_sync("refused-1")
    assert record is not None and record["status"] == "failed" and record["attempt"] == 0
    assert record["result"]["error"] == result.error.to_dict()
    assert run(session.record("refused-1")) == record


def test_malformed_json_and_non_objects(session_factory):
    session = session_factory(FILES)
    bad = session.call_sync("view", '{"file": ')
    assert bad.error.kind == "invalid_arguments" and "not valid JSON" in bad.error.detail
    arr = session.call_sync("view", "[1]")
    assert arr.error.kind == "invalid_arguments" and "JSON object" in arr.error.detail


def test_unknown_tool_is_not_found_with_a_suggestion(session_factory):
    session = session_factory(FILES)
    result = session.call_sync("veiw", {"file": "x"})
    assert result.error.kind == "not_found" and "`view`" in result.error.detail


def test_paths_outside_the_workspace_are_refused_and_untouched(session_factory, tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    session = session_factory(FILES)
    for args in (
        {"path": "../outside.txt", "content": "x"},
        {"path": str(outside), "content": "x"},
    ):
        result = session.call_sync("write_file", args)
        assert result.error is not None and result.error.kind == "permission_denied"
    assert outside.read_text() == "keep me"


def test_state_persists_across_calls_and_sessions(session_factory):
    session = session_factory(FILES, session_id="todo-session")
    first = session.call_sync("todo_write", {"todos": [{"id": "1", "content": "a"}]})
    assert not first.is_error, first.prompt_text
    session.call_sync("todo_write", {"todos": [{"id": "2", "content": "b"}], "merge": True})
    session.close()
    again = session_factory(FILES, session_id="todo-session")
    third = again.call_sync("todo_write", {"todos": [{"id": "3", "content": "c"}], "merge": True})
    assert not third.is_error
    assert [t["id"] for t in third.output.value["todos"]] == ["1", "2", "3"]


def test_cancel_ends_a_running_command_with_a_cancelled_terminal(session_factory):
    session = session_factory(FILES)

    async def go():
        items = []

        async def consume():
            async for item in session.stream(
                "bash",
                {"command": "echo so-far; sleep 300", "description": "t"},
                call_id="to-cancel",
            ):
                items.append(item)

        task = asyncio.create_task(consume())
        # Once the command printed (on a busy machine that can take seconds), cancel it.
        deadline = time.monotonic() + 60
        while not any("so-far" in str(getattr(item, "payload", "")) for item in items):
            assert time.monotonic() < deadline, f"the command never printed: {items}"
            await asyncio.sleep(0.05)
        started = time.monotonic()
        assert await session.cancel("to-cancel")
        await asyncio.wait_for(task, 90)
        return items, time.monotonic() - started

    items, took = run(go())
    result = items[-1]
    assert isinstance(result, CallResult) and result.error.kind == "cancelled"
    assert took < 60, "the cancel ended the command, not the command's own end"
    # The tool's own account of the kill, with the output so far, is what the caller reads.
    assert "exit: killed (cancelled)" in result.error.detail, result.error.detail
    assert "so-far" in result.prompt_text


def test_sync_twins_from_another_thread(session_factory):
    session = session_factory(FILES)
    out: list[CallResult] = []
    thread = threading.Thread(
        target=lambda: out.append(session.call_sync("list_dir", {"path": "."}))
    )
    thread.start()
    thread.join(30)
    assert out and not out[0].is_error
    streamed = list(session.stream_sync("bash", {"command": "echo x", "description": "t"}))
    assert isinstance(streamed[-1], CallResult) and not streamed[-1].is_error


def test_external_tool_registered_at_runtime(session_factory):
    session = session_factory(FILES)

    async def handler(args, ctx):
        return {"sum": args["a"] + args["b"]}

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    session.register_external("calc__add", "Add two numbers", schema, handler)
    assert "calc__add" in [d["name"] for d in session.definitions("mcp")]
    result = run(session.call("calc__add", {"a": 2, "b": 3}))
    assert result.output.value == {"sum": 5} and result.output.tag == "dynamic"
    assert session.unregister_external("calc__add")
    assert run(session.call("calc__add", {})).error.kind == "not_found"


def test_render_prompt_resolves_client_names(session_factory):
    session = session_factory(FILES)
    assert session.render_prompt("Read with ${{ tools.by_kind.read }}.") == "Read with view."
