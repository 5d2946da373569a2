"""One definition, three wire shapes: OpenAI function tools, Anthropic tools, MCP tools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FORMATS = ("openai", "anthropic", "mcp")


@dataclass(frozen=True, slots=True)
class Definition:
    """A tool as the model sees it: client name, rendered description, client-named schema."""

    name: str
    description: str
    parameters: dict[str, Any]


def render_definitions(definitions: Sequence[Definition], format: str) -> list[dict[str, Any]]:
    if format == "openai":
        return [
            {
                "type": "function",
                "function": {
                    "name": d.name,
                    "description": d.description,
                    "parameters": d.parameters,
                },
            }
            for d in definitions
        ]
    if format == "anthropic":
        return [
            {"name": d.name, "description": d.description, "input_schema": d.parameters}
            for d in definitions
        ]
    if format == "mcp":
        return [
            {"name": d.name, "description": d.description, "inputSchema": d.parameters}
            for d in definitions
        ]
    raise ValueError(f"unknown definition format {format!r}; use one of {', '.join(FORMATS)}")
