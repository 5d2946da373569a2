"""External tools: JSON in, JSON out, registered at runtime (MCP servers, remote hubs, host code).

They have no Python types to erase; arguments pass through as a JSON object and the output comes
back tagged ``dynamic`` (or ``plain_text`` for a string).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from toolhub.core import (
    ErrorKind,
    Outcome,
    Progress,
    ToolContext,
    ToolError,
    ToolOutput,
    closing,
)
from toolhub.core.result import default_model_text
from toolhub.core.schema import null_plan

from .external_check import ArgumentCheck

ExternalHandler = Callable[[dict[str, Any], ToolContext], Any]
"""Returns the output (or an awaitable of it), or an async iterator of Progress then output."""


@dataclass(frozen=True)
class ExternalSpec:
    """What the tool set knows of an external tool. ``source`` says where it comes from in a
    form other processes can act on (``{"mcp": "time"}``, ``{"hub": "shared"}``)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    source: dict[str, Any] = field(default_factory=dict)


class ExternalTool:
    """The erased handle of an external tool."""

    is_sync = False

    def __init__(self, spec: ExternalSpec, handler: ExternalHandler) -> None:
        self.spec = spec
        self.handler = handler
        self.fq_id = f"External:{spec.name}"
        self.input_schema = spec.input_schema
        self.properties = frozenset(spec.input_schema.get("properties", {}))
        self._nulls = null_plan(spec.input_schema)

    @cached_property
    def _check(self) -> ArgumentCheck | None:
        """Compiled at the first call, not at registration (``external_check.py``)."""
        return ArgumentCheck.for_schema(self.input_schema)

    def parse_args(
        self,
        arguments: Mapping[str, Any],
        *,
        client_name: str,
        client_names: Mapping[str, str] | None = None,
        original: str | Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The arguments as given, less the ``null``s the strict form of the tool's schema
        invited where the schema itself refuses them, checked against the schema
        (``external_check.py``): a bad call is refused here, before any dispatch."""
        args = dict(arguments) if self._nulls is None else self._nulls.apply(arguments)
        if self._check is not None:
            self._check.check(args, tool=client_name)
        return args

    def run_sync(self, ctx: ToolContext, args: Any) -> Outcome:
        raise ToolError(ErrorKind.NOT_IMPLEMENTED, "external tools run asynchronously")

    async def stream(self, ctx: ToolContext, args: Any) -> AsyncIterator[Progress | Outcome]:
        try:
            result = self.handler(dict(args), ctx)
            if inspect.isasyncgen(result):
                last: Any = None
                async with closing(result) as items:
                    async for item in items:
                        if isinstance(item, Progress):
                            yield item
                        else:
                            last = item
                result = last
            elif isinstance(result, Awaitable):
                result = await result
        except ToolError as err:
            yield Outcome(error=err)
            return
        except Exception as exc:
            yield Outcome(error=ToolError.execution(f"{type(exc).__name__}: {exc}"))
            return
        # A handler that knows the model text (an MCP result, a remote toolhub) returns an Outcome.
        yield result if isinstance(result, Outcome) else encode_dynamic(result, self.fq_id)


def encode_dynamic(value: Any, tool_id: str) -> Outcome:
    if isinstance(value, str):
        return Outcome(ToolOutput.plain_text(value, tool_id), value)
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        return Outcome(error=ToolError.execution(f"{tool_id} returned unencodable output: {exc}"))
    return Outcome(ToolOutput.dynamic(value, tool_id), default_model_text(value))
