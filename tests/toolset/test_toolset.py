import asyncio

import pytest

from tests.sample_tools import Notes
from toolhub.core import CallResult, ConfigError, Progress, State, ToolError
from toolhub.executors import LocalExecutor

CONFIG = {
    "tools": [
        {"id": "Main:echo", "name": "say", "rename": {"text": "message"}},
        {"id": "Main:writer", "name": "put", "rename": {"content": "body"}, "params": {"limit": 7}},
        {"id": "Main:count"},
        {"id": "Main:add_note"},
        {"id": "Main:silent"},
    ]
}


def test_definitions_carry_renamed_names_and_rendered_descriptions(builder):
    toolset = builder.build(CONFIG)
    defs = {d["function"]["name"]: d["function"] for d in toolset.definitions()}
    say = defs["say"]
    assert set(say["parameters"]["properties"]) == {"message", "times"}
    assert say["parameters"]["required"] == ["message"]
    assert say["description"] == "Echo text. Edit with . Literal {{ braces }}."
    assert "say" in say["parameters"]["properties"]["message"]["description"]
    assert defs["put"]["description"] == "Write files (limit 7). Then check with say."
    assert defs["put"]["parameters"]["required"] == ["path", "body"]


def test_three_definition_formats_agree(builder):
    toolset = builder.build(CONFIG)
    openai = toolset.definitions("openai")
    anthropic = toolset.definitions("anthropic")
    mcp = toolset.definitions("mcp")
    for o, a, m in zip(openai, anthropic, mcp, strict=True):
        assert o["function"]["name"] == a["name"] == m["name"]
        assert o["function"]["parameters"] == a["input_schema"] == m["inputSchema"]
    with pytest.raises(ValueError):
        toolset.definitions("yaml")


def test_description_override_is_still_rendered_in_the_sandbox(builder):
    toolset = builder.build(
        {"tools": [{"id": "Main:echo", "description": "Use me, not ${{ tools.by_kind.read }}"}]}
    )
    assert toolset.definitions()[0]["function"]["description"] == "Use me, not echo"
    with pytest.raises(ConfigError) as err:
        builder.build(
            {"tools": [{"id": "Main:echo", "description": "${{ ''.__class__.__mro__ }}"}]}
        )
    assert err.value.violations[0].category == "template_render"


def test_call_with_renamed_params_reaches_the_canonical_field(builder):
    toolset = builder.build(CONFIG)
    prepared = toolset.prepare("say", {"message": "hi", "times": 2}, "c1")
    result = toolset.execute_sync(prepared)
    assert result.prompt_text == "echo: hihi" and result.output.value == {"echoed": "hihi"}


def test_unknown_name_is_not_found_with_suggestions(builder):
    toolset = builder.build(CONFIG)
    with pytest.raises(ToolError) as err:
        toolset.prepare("sya", {}, "c1")
    assert err.value.kind == "not_found" and "`say`" in err.value.detail


def test_call_streaming_forwards_progress_and_finalizes_terminal(builder):
    toolset = builder.build(CONFIG)
    executor = LocalExecutor(toolset)

    async def go():
        return [i async for i in executor.stream(toolset.prepare("count", {"n": 2}, "c"))]

    items = asyncio.run(go())
    assert [type(i) for i in items] == [Progress, Progress, CallResult]
    assert items[-1].output.value == {"total": 2}


def test_call_returns_error_when_inner_stream_has_no_terminal(builder):
    toolset = builder.build(CONFIG)

    async def go():
        return [i async for i in toolset.execute(toolset.prepare("silent", {}, "c"))]

    result = asyncio.run(go())[-1]
    assert result.is_error and result.error.code == "stream_no_terminal"
    assert result.prompt_text.startswith("Tool `silent` failed: ")


class Once:
    from toolhub.core.requirements import TRUE as requires

    def __init__(self):
        self.seen = 0

    def collect(self, container, output):
        self.seen += 1
        return [f"seen {self.seen}"]


def test_reminders_append_with_the_session_tag_and_can_be_switched_off(builder):
    reminder = Once()
    builder.register_reminder(reminder)
    toolset = builder.build({**CONFIG, "reminder_tag": "note"})
    result = toolset.execute_sync(toolset.prepare("say", {"message": "a"}, "c"))
    assert result.prompt_text == "echo: a\n\n<note>\nseen 1\n</note>"
    assert result.output.value == {"echoed": "a"}
    off = builder.build({**CONFIG, "reminders": False})
    assert off.execute_sync(off.prepare("say", {"message": "a"}, "c")).prompt_text == "echo: a"


def test_a_reminder_that_raises_is_skipped(builder):
    class Broken:
        from toolhub.core.requirements import TRUE as requires

        def collect(self, container, output):
            raise RuntimeError("bug")

    builder.register_reminder(Broken())
    toolset = builder.build(CONFIG)
    assert (
        toolset.execute_sync(toolset.prepare("say", {"message": "a"}, "c")).prompt_text == "echo: a"
    )


def test_reminder_requirements_filter_active_reminders(builder):
    from toolhub.core import ToolKind
    from toolhub.core.requirements import Kind

    class NeedsLsp(Once):
        requires = Kind(ToolKind.LSP)

    builder.register_reminder(NeedsLsp())
    assert builder.build(CONFIG).reminders == ()


def test_finalize_persists_and_state_changes_through_the_container(builder):
    toolset = builder.build(CONFIG)
    calls = []
    toolset.on_finalize = lambda: calls.append(1)
    toolset.execute_sync(toolset.prepare("add_note", {"note": "x"}, "c"))
    toolset.execute_sync(toolset.prepare("add_note", {"note": "y"}, "c"))
    assert toolset.container.require(State[Notes]).items == ["x", "y"]
    assert toolset.container.serialize()["state"] == {"tests.notes": {"items": ["x", "y"]}}
    assert len(calls) == 2


def test_external_tools_register_dispatch_and_unregister(builder):
    from toolhub.toolset import ExternalSpec

    toolset = builder.build(CONFIG)
    spec = ExternalSpec("time__now", "What time is it", {"type": "object", "properties": {}})

    async def handler(args, ctx):
        return {"now": "noon", "args": args}

    toolset.register_external(spec, handler)
    assert "time__now" in [d["name"] for d in toolset.definitions("mcp")]
    assert "time__now" not in [
        d["name"] for d in toolset.definitions("mcp", include_external=False)
    ]

    async def go():
        return [
            i async for i in toolset.execute(toolset.prepare("time__now", '{"tz": "UTC"}', "c"))
        ]

    result = asyncio.run(go())[-1]
    assert result.output.tag == "dynamic" and result.output.value["args"] == {"tz": "UTC"}
    assert toolset.unregister_external("time__now") and not toolset.unregister_external("say")
    with pytest.raises(ToolError):
        toolset.prepare("time__now", {}, "c")


@pytest.mark.parametrize("name", ["time", "a__b__c", "__tool", "server__", "foo___bar", "a.b__c"])
def test_qualified_external_names_are_validated(builder, name):
    from toolhub.toolset import ExternalSpec

    toolset = builder.build(CONFIG)
    with pytest.raises(ToolError):
        toolset.register_external(ExternalSpec(name, "", {"type": "object"}), lambda a, c: None)


def test_internal_dispatch_skips_reminders_and_records_effective_name(builder):
    reminder = Once()
    builder.register_reminder(reminder)
    toolset = builder.build(CONFIG)
    outer = toolset.prepare("count", {"n": 0}, "outer")

    async def go():
        inner = await outer.ctx.dispatch("say", {"message": "z"})
        return inner

    inner = asyncio.run(go())
    assert inner.prompt_text == "echo: z" and reminder.seen == 0
    assert outer.ctx.effective_tool_name == "say"
    bad = asyncio.run(outer.ctx.dispatch("nope", {}))
    assert bad.is_error and bad.error.kind == "not_found"


def test_a_dispatcher_kept_past_its_call_answers_cancelled(builder):
    """The dispatcher holds its context weakly (no cycle per call): once the call's context
    is gone, a dispatcher something kept answers instead of running a tool for nobody."""
    toolset = builder.build(CONFIG)
    dispatch = toolset.prepare("count", {"n": 0}, "outer").ctx.dispatch
    assert dispatch is not None
    late = asyncio.run(dispatch("say", {"message": "z"}))
    assert late.is_error and late.error.kind == "cancelled"


def test_render_prompt_uses_client_names(builder):
    toolset = builder.build(CONFIG)
    assert toolset.render_prompt("Write with ${{ tools.by_kind.write }}") == "Write with put"
