"""Strict definitions (issue 14), checked with the real openai-agents conversion: every built-in
tool converts to OpenAI strict mode with no fallback, and the ``null`` a strict-mode model sends
for each optional parameter is taken as "absent", not refused."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from agents import FunctionTool
from agents.mcp import MCPServer, MCPUtil
from agents.strict_schema import ensure_strict_json_schema
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.types import Tool as MCPTool
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

from tests.fuzz_size import examples
from toolhub import Session
from toolhub.core import ErrorKind
from toolhub.core.schema import null_plan
from toolhub.toolset.strict import strict_schema

pytestmark = pytest.mark.timeout(120)

CODEX = {
    "tools": [
        {"id": "Codex:apply_patch"},
        {"id": "Codex:read_file", "rename": {"file_path": "path"}},
        {"id": "Codex:list_dir"},
        {"id": "Codex:grep_files", "name": "search_files"},
        {
            "id": "Main:bash",
            "name": "run",
            "rename": {"command": "cmd", "is_background": "background"},
        },
        {"id": "Main:task_output"},
        {"id": "Main:kill_task"},
        {"id": "Main:todo_write", "rename": {"merge": "keep_others"}},
    ]
}
OPENCODE = {"preset": "opencode"}
CONFIGS = {"default": None, "codex_and_renames": CODEX, "opencode": OPENCODE}


class _Listing(MCPServer):
    """Just enough of an MCP server for ``MCPUtil.to_function_tool``, the conversion that
    falls back to non-strict without a word when a schema does not convert."""

    name = "toolhub"

    async def connect(self) -> None: ...
    async def cleanup(self) -> None: ...
    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[MCPTool]:
        return []

    async def call_tool(self, *args: Any, **kwargs: Any) -> Any: ...
    async def list_prompts(self) -> Any: ...
    async def get_prompt(self, *args: Any, **kwargs: Any) -> Any: ...


def _session(config: Any, tmp_path: Path) -> Session:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("hello world\n")
    (workspace / "MEMORY.md").write_text("- hello from memory\n")
    return Session.embedded(config, workspace, state_dir=tmp_path / "state")


def _unused(*_: Any) -> Any:
    raise AssertionError("not invoked")


@pytest.mark.parametrize("config", CONFIGS.values(), ids=list(CONFIGS))
def test_every_definition_converts_to_strict_with_openai_agents(
    config: Any, tmp_path: Path
) -> None:
    with _session(config, tmp_path) as session:
        openai = session.definitions("openai", strict=True)
        mcp = session.definitions("mcp", strict=True)
    assert openai and all(d["function"]["strict"] is True for d in openai)
    fallbacks = []
    for definition, listed in zip(openai, mcp, strict=True):
        function = definition["function"]
        schema = function["parameters"]
        # Already strict: openai-agents' own rewrite finds nothing to change.
        assert ensure_strict_json_schema(copy.deepcopy(schema), _reject_open_objects=True) == schema
        tool = FunctionTool(
            name=function["name"],
            description=function["description"],
            params_json_schema=copy.deepcopy(schema),
            on_invoke_tool=_unused,
            strict_json_schema=True,
        )
        assert tool.params_json_schema == schema
        converted = MCPUtil.to_function_tool(
            MCPTool(name=listed["name"], inputSchema=listed["inputSchema"]), _Listing(), True
        )
        if not converted.strict_json_schema:
            fallbacks.append(function["name"])
        # pydantic-ai's check of the keywords strict mode refuses (default, minLength, ...).
        checker = OpenAIJsonSchemaTransformer(copy.deepcopy(schema), strict=None)
        checker.walk()
        assert checker.is_strict_compatible, function["name"]
    assert fallbacks == []
    if config is None:
        assert len(openai) == 24


def test_non_strict_schemas_are_closed_as_the_validator_is(tmp_path: Path) -> None:
    with _session(None, tmp_path) as session:
        for definition in session.definitions("openai"):
            assert definition["function"]["parameters"]["additionalProperties"] is False
            assert "strict" not in definition["function"]
        refused = session.call_sync("read_file", {"path": "notes.txt", "bogus": None})
        closed = session.definitions("mcp")
    assert refused.error is not None and refused.error.kind == ErrorKind.INVALID_ARGUMENTS
    assert "unknown argument(s) `bogus`" in refused.error.detail
    # The plain listing converts too: openai-agents' MCP strict conversion keeps every tool
    # strict, ``use_tool`` included (its ``tool_input`` is JSON text, not an open object).
    fallbacks = [
        d["name"]
        for d in closed
        if not MCPUtil.to_function_tool(
            MCPTool(name=d["name"], inputSchema=d["inputSchema"]), _Listing(), True
        ).strict_json_schema
    ]
    assert fallbacks == []


REQUIRED: dict[str, Any] = {
    "path": "notes.txt",
    "file_path": "notes.txt",
    "filePath": "notes.txt",
    "oldString": "world",
    "newString": "there",
    "dir_path": ".",
    "content": "hello\n",
    "old_string": "world",
    "new_string": "there",
    "pattern": "hello",
    "command": "echo hello",
    "cmd": "echo hello",
    "description": "say hello",
    "task_ids": ["missing"],
    "tool_name": "srv__missing",
    "query": "hello",
    "operation": "workspaceSymbol",
    "todos": [{"id": "1", "content": "write tests", "status": None}],
    "questions": [{"question": "Go on?", "options": None}],
}


#: Where the value by parameter name makes no sense for the tool.
FOR_TOOL: dict[str, dict[str, Any]] = {"memory_get": {"path": "MEMORY.md"}}


def _optional(schema: Any) -> int:
    """How many optional properties a schema has, nested ones (array items, unions) too."""
    if not isinstance(schema, dict):
        return 0
    properties = schema.get("properties", {})
    own = len(set(properties) - set(schema.get("required", [])))
    inner = [*properties.values(), schema.get("items"), *schema.get("anyOf", [])]
    return own + sum(_optional(sub) for sub in inner)


async def _call(session: Session, name: str, arguments: dict[str, Any]) -> Any:
    if name != "ask_user":
        return await session.call(name, arguments, timeout=60)
    running = asyncio.create_task(session.call(name, arguments, call_id="ask-1"))
    while not session.answer("ask-1", ["yes"]):
        assert not running.done(), running.result()
        await asyncio.sleep(0.02)
    return await running


@pytest.mark.parametrize("config", CONFIGS.values(), ids=list(CONFIGS))
def test_null_for_every_optional_parameter_is_absent(config: Any, tmp_path: Path) -> None:
    """What a strict-mode model sends: every property, ``null`` for the optional ones."""
    with _session(config, tmp_path) as session:
        loose = {d["name"]: d["inputSchema"] for d in session.definitions("mcp")}
        calls = {}
        for name, schema in loose.items():
            if _optional(schema):
                args = {p: REQUIRED[p] for p in schema["required"]}
                optional = set(schema["properties"]) - set(schema["required"])
                calls[name] = {**args, **dict.fromkeys(optional), **FOR_TOOL.get(name, {})}

        async def run_all() -> dict[str, Any]:
            return {name: await _call(session, name, args) for name, args in calls.items()}

        results = asyncio.run(run_all())
    assert len(calls) == (16 if config is None else 5 if config is OPENCODE else 6)
    for name, result in results.items():
        refused = result.error is not None and "Failed to parse arguments" in result.error.detail
        assert not refused, (name, result.error)
    if config is None:
        listed = results["list_dir"]
        assert listed.error is None and "notes.txt" in listed.prompt_text
        assert results["bash"].error is None and "hello" in results["bash"].prompt_text
        assert results["grep"].error is None and "notes.txt" in results["grep"].prompt_text
        assert results["memory_get"].error is None and "hello" in results["memory_get"].prompt_text
        assert results["ask_user"].error is None
    elif config is OPENCODE:
        assert results["bash"].error is None and "hello" in results["bash"].prompt_text
        assert results["read"].error is None and "hello world" in results["read"].prompt_text
        assert results["grep"].error is None and "notes.txt" in results["grep"].prompt_text
    else:
        assert results["run"].error is None and "hello" in results["run"].prompt_text
        assert (
            results["read_file"].error is None and "hello world" in results["read_file"].prompt_text
        )


def test_null_stays_an_error_where_a_parameter_is_required(tmp_path: Path) -> None:
    with _session(None, tmp_path) as session:
        result = session.call_sync("grep", {"pattern": None})
    assert result.error is not None and "Failed to parse arguments" in result.error.detail
    assert "`pattern`" in result.error.detail


def test_external_tools_lose_the_nulls_their_schema_refuses(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "default": 3},
            "units": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "filter": {
                "type": "object",
                "properties": {"kind": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["kind"],
            },
        },
        "required": ["city"],
    }
    with _session(None, tmp_path) as session:
        session.register_external(
            "weather__forecast", "Forecast.", schema, lambda args, ctx: seen.append(args) or "ok"
        )
        strict = {d["function"]["name"]: d["function"] for d in session.definitions(strict=True)}
        result = session.call_sync(
            "weather__forecast",
            {"city": "Oslo", "days": None, "units": None, "filter": {"kind": "x", "limit": None}},
        )
    held = strict["weather__forecast"]
    assert held["strict"] is True
    assert held["parameters"]["properties"]["filter"]["anyOf"][1] == {"type": "null"}
    assert result.error is None, result.error
    assert seen == [{"city": "Oslo", "units": None, "filter": {"kind": "x"}}]


def test_schemas_strict_mode_cannot_say_are_listed_non_strict() -> None:
    open_object = {
        "type": "object",
        "properties": {"options": {"type": "object", "additionalProperties": True}},
    }
    untyped_items = {"type": "object", "properties": {"xs": {"type": "array"}}}
    assert strict_schema(open_object) is None
    assert strict_schema(untyped_items) is None
    assert strict_schema({"type": "object", "allOf": [{"properties": {}}]}) is None
    assert strict_schema({"type": "array", "items": {"type": "string"}}) is None


def test_strict_rewrite_of_refs_one_of_and_refused_keywords() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {
            "at": {"$ref": "#/$defs/Point", "description": "Where."},
            "shape": {"oneOf": [{"const": "dot"}, {"const": "ring"}]},
            "name": {"type": "string", "minLength": 2, "format": "slug"},
        },
        "required": ["at", "shape"],
    }
    held = strict_schema(schema)
    assert held is not None and "$defs" not in held
    assert held["properties"]["at"] == {
        "type": "object",
        "properties": {"x": {"type": ["number", "null"]}},
        "required": ["x"],
        "additionalProperties": False,
        "description": "Where.",
    }
    assert held["properties"]["shape"] == {"anyOf": [{"const": "dot"}, {"const": "ring"}]}
    name = held["properties"]["name"]
    assert name["type"] == ["string", "null"]
    assert name["description"] == "minLength: 2; format: slug"
    assert held["required"] == ["at", "shape", "name"]
    assert ensure_strict_json_schema(copy.deepcopy(held), _reject_open_objects=True) == held


def test_a_recursive_ref_stays_a_reference_with_its_definitions() -> None:
    tree = {
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        },
        "required": ["label"],
    }
    held = strict_schema({"$ref": "#/$defs/Tree", "$defs": {"Tree": tree}})
    assert held is not None
    children = held["properties"]["children"]
    assert children["type"] == ["array", "null"] and children["items"] == {"$ref": "#/$defs/Tree"}
    assert held["$defs"]["Tree"]["required"] == ["label", "children"]
    tool = FunctionTool(
        name="tree",
        description="",
        params_json_schema=copy.deepcopy(held),
        on_invoke_tool=_unused,
        strict_json_schema=True,
    )
    assert tool.params_json_schema == held


def test_strict_is_refused_for_anthropic(tmp_path: Path) -> None:
    with _session(None, tmp_path) as session, pytest.raises(ValueError, match="strict"):
        session.definitions("anthropic", strict=True)


_KEYS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "items",
        "anyOf",
        "oneOf",
        "$ref",
        "$defs",
        "enum",
        "additionalProperties",
        "default",
        "minLength",
        "allOf",
        "const",
        "description",
        "x",
    ]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["object", "null", "#/$defs/x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=examples(150, 300), deadline=None, database=None)
@given(schema=st.dictionaries(_KEYS, _JSON, max_size=5), arguments=st.dictionaries(_KEYS, _JSON))
def test_any_external_schema_gives_a_strict_form_or_none_never_an_error(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    """External schemas come from anyone (MCP servers, HTTP registrations)."""
    held = strict_schema(schema)
    assert held is None or (held["type"] == "object" and held["additionalProperties"] is False)
    plan = null_plan(schema)
    if plan is not None:
        plan.apply(arguments)
