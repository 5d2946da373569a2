"""One definition, three wire shapes: OpenAI function tools, Anthropic tools, MCP tools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .strict import strict_schema

FORMATS = ("openai", "anthropic", "mcp")
#: Formats with a strict form: OpenAI's own, and MCP for clients that hold MCP tools to
#: OpenAI strict mode (openai-agents' ``convert_schemas_to_strict``). Anthropic's strict tool
#: use accepts another subset of JSON Schema.
STRICT_FORMATS = ("openai", "mcp")


@dataclass(frozen=True, slots=True)
class Definition:
    """A tool as the model sees it: client name, rendered description, client-named schema."""

    name: str
    description: str
    parameters: dict[str, Any]
    #: the strict form of ``parameters``, made at the first strict listing (``strict_parameters``)
    _strict: tuple[dict[str, Any] | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def strict_parameters(self) -> dict[str, Any] | None:
        """``parameters`` in OpenAI strict form, or None when they have none. Computed once:
        a definition never changes, and converting every one per listing grows with the set."""
        if self._strict is None:
            object.__setattr__(self, "_strict", (strict_schema(self.parameters),))
        assert self._strict is not None
        return self._strict[0]


def render_definitions(
    definitions: Sequence[Definition], format: str, *, strict: bool = False
) -> list[dict[str, Any]]:
    """The definitions in ``format``; ``strict``: in OpenAI strict form (``strict_schema``),
    each OpenAI function marked ``strict: true``, or ``false`` for a tool whose schema has no
    strict form (listed as it is)."""
    if format not in FORMATS:
        raise ValueError(f"unknown definition format {format!r}; use one of {', '.join(FORMATS)}")
    if strict and format not in STRICT_FORMATS:
        raise ValueError(
            f"no strict form for {format!r} definitions; strict is for {', '.join(STRICT_FORMATS)}"
        )
    if format == "openai":
        out = []
        for d in definitions:
            function: dict[str, Any] = {
                "name": d.name,
                "description": d.description,
                "parameters": d.parameters,
            }
            if strict:
                held = d.strict_parameters()
                function["parameters"] = d.parameters if held is None else held
                function["strict"] = held is not None
            out.append({"type": "function", "function": function})
        return out
    if format == "anthropic":
        return [
            {"name": d.name, "description": d.description, "input_schema": d.parameters}
            for d in definitions
        ]
    return [
        {
            "name": d.name,
            "description": d.description,
            "inputSchema": (d.strict_parameters() if strict else None) or d.parameters,
        }
        for d in definitions
    ]
