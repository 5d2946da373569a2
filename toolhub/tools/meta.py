"""Meta-tools over the external tool catalogue: ``search_tool`` finds tools, ``use_tool`` calls
one by name.

``use_tool`` goes through the tool set's internal dispatch (``ctx.dispatch``): same lookup and
argument validation as a direct call, but reminders and persistence run once, for the outer call.
It only calls external tools (``server__tool``); given a native tool's name it tells the model to
call that tool directly instead of dispatching.

Its schema declares ``tool_input`` as text (the JSON object of the target tool's arguments):
strict mode cannot say "an object with any keys", and an SDK that converts the schema an MCP
server lists to strict itself (openai-agents' ``convert_schemas_to_strict``) would otherwise
list ``use_tool`` non-strict. The validator still takes an object, for the clients and models
that send one.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, Field, WithJsonSchema

from toolhub.backends.tool_index import EnabledToolNames, ToolIndex
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind
from toolhub.core.requirements import Kind
from toolhub.errors import ErrorCode

from .text import kind_name

EXTERNAL_SEPARATOR = "__"
DESCRIPTION_LIMIT = 2048


#: What the schema says of ``tool_input``: JSON text (or null for no arguments). Strict mode
#: can say that, and every client can send it; an object is accepted all the same.
_TOOL_INPUT_SCHEMA = {"type": ["string", "null"]}


class UseToolArgs(BaseModel):
    tool_name: str = Field(description="The external tool to call, `server__tool`.")
    tool_input: Annotated[dict[str, Any] | str | None, WithJsonSchema(_TOOL_INPUT_SCHEMA)] = Field(
        None,
        description=(
            "The tool's arguments: a JSON object as text, "
            'e.g. `{"path": "a.txt", "limit": 5}`; null for none.'
        ),
    )


class UseToolParams(BaseModel):
    max_output_bytes: int = Field(20_000, ge=100)


class UseToolOutput(BaseModel):
    tool_name: str
    text: str
    output: Any = None
    truncated: bool = False

    def model_text(self) -> str:
        return self.text


class UseTool(Tool[UseToolArgs, UseToolOutput]):
    id = "use_tool"
    kind = ToolKind.USE_TOOL
    description_template = (
        "Call an external tool (named `server__tool`) that is not in your tool list, with its "
        "arguments as the text of a JSON object in `${{ params.use_tool.tool_input }}`."
        "${% if tools.by_kind.search_tool %} Find it and its parameters with "
        "`${{ tools.by_kind.search_tool }}` first.${% endif %}"
    )
    params_model = UseToolParams

    async def run(self, ctx: ToolContext, args: UseToolArgs) -> UseToolOutput:
        name = args.tool_name.strip()
        if EXTERNAL_SEPARATOR not in name.strip("_"):
            raise ToolError.invalid_arguments(_not_external(ctx, name))
        arguments = _arguments(args.tool_input, ctx.param_name("tool_input"))
        if ctx.dispatch is None:
            raise ToolError.custom(
                ErrorCode.NO_DISPATCH,
                "use_tool cannot call other tools from inside another meta-tool",
            )
        result = await ctx.dispatch(name, arguments)
        if result.error is not None:
            raise result.error
        limit = ctx.container.get_or_default(Params[UseToolParams]).max_output_bytes
        text, truncated = _truncate(result.prompt_text, limit)
        value = None if result.output is None else result.output.value
        if value is not None and len(json.dumps(value, default=str)) > limit:
            value = None
        return UseToolOutput(tool_name=name, text=text, output=value, truncated=truncated)


def _not_external(ctx: ToolContext, name: str) -> str:
    enabled = ctx.container.get(EnabledToolNames)
    if enabled is not None and name in enabled.names:
        return f"`{name}` is a native tool, not an external one: call `{name}` directly."
    finder = kind_name(ctx, ToolKind.SEARCH_TOOL, "search_tool")
    return (
        f"'{name}' is not a valid external tool name: external tools are named `server__tool`. "
        f"Use `{finder}` to find the tool you need."
    )


def _arguments(raw: dict[str, Any] | str | None, param: str) -> dict[str, Any]:
    """The arguments from their JSON text (what the schema asks for) or an object (what some
    clients and models send anyway); null, empty text and ``"null"`` are ``{}``. Anything else
    is a typed error naming the parameter."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    text = raw.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError.invalid_arguments(f"`{param}` is not valid JSON: {exc}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolError.invalid_arguments(
            f"`{param}` must be a JSON object, got {type(value).__name__}"
        )
    return value


def _truncate(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n\n[output truncated at {limit} of {len(data)} bytes]", True


class SearchToolArgs(BaseModel):
    query: str = Field(description="What the tool should do, in a few words.")
    limit: int = Field(5, ge=1, le=20, description="How many tools to return.")


class FoundTool(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any] = Field(default_factory=dict)


class SearchToolOutput(BaseModel):
    query: str
    tools: list[FoundTool] = Field(default_factory=list)
    caller: str = "use_tool"

    def model_text(self) -> str:
        if not self.tools:
            return f'No external tools match "{self.query}".'
        blocks = [f'External tools for "{self.query}" (call them with `{self.caller}`):']
        for tool in self.tools:
            schema = json.dumps(tool.input_schema, separators=(",", ":"))
            blocks.append(f"## {tool.name}\n{tool.description}\nInput schema: {schema}")
        return "\n\n".join(blocks)


class SearchTool(Tool[SearchToolArgs, SearchToolOutput]):
    id = "search_tool"
    kind = ToolKind.SEARCH_TOOL
    description_template = (
        "Search the external tools (MCP servers and others) that are not in your tool list; "
        "returns names, descriptions and input schemas. Call a match with "
        "`${{ tools.by_kind.use_tool }}`."
    )
    requires = Kind(ToolKind.USE_TOOL)

    def run(self, ctx: ToolContext, args: SearchToolArgs) -> SearchToolOutput:
        caller = kind_name(ctx, ToolKind.USE_TOOL, "use_tool")
        index = ctx.container.get(ToolIndex)
        if index is None:
            return SearchToolOutput(query=args.query, caller=caller)
        found = [
            FoundTool(
                name=e.name,
                description=e.description[:DESCRIPTION_LIMIT],
                input_schema=e.input_schema,
            )
            for e in index.search(args.query, args.limit)
        ]
        return SearchToolOutput(query=args.query, tools=found, caller=caller)


TOOLS: list[type[Tool[Any, Any]]] = [UseTool, SearchTool]
