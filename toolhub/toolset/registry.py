"""What the builder knows before any config is seen: every registrable tool (type-erased once),
the cross-tool reminders, the behavior presets and the tool-set presets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from toolhub.core import ErasedTool, Reminder, Tool

from .config import ToolConfig

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ID_SEGMENT = re.compile(r"^[A-Za-z0-9_-]+$")
EXTERNAL_SEPARATOR = "__"


def valid_tool_id(fq_id: str) -> bool:
    parts = fq_id.split(":")
    return len(parts) <= 2 and all(ID_SEGMENT.match(p) for p in parts)


def valid_external_name(name: str) -> bool:
    """``server__tool``: exactly one ``__`` boundary, both sides non-empty, no stray ``_`` at it."""
    if not NAME_PATTERN.match(name) or name.count(EXTERNAL_SEPARATOR) != 1:
        return False
    server, tool = name.split(EXTERNAL_SEPARATOR)
    return bool(server) and bool(tool) and not server.endswith("_") and not tool.startswith("_")


@dataclass(frozen=True)
class Registered:
    """A registered tool: its class, one instance, and the erased handle made from it."""

    tool: Tool[Any, Any]
    erased: ErasedTool

    @property
    def fq_id(self) -> str:
        return self.erased.fq_id


@dataclass(frozen=True)
class ToolSetPreset:
    """A named tool list a config can pick instead of listing tools."""

    name: str
    description: str
    tools: tuple[ToolConfig, ...]


@dataclass
class Registry:
    tools: dict[str, Registered] = field(default_factory=dict)
    reminders: list[Reminder] = field(default_factory=list)
    presets: dict[str, dict[str, str]] = field(default_factory=lambda: {"current": {}})
    default_tools: list[str] = field(default_factory=list)
    #: ``preset: <name>`` picks one of these tool lists (config entries, validated like any).
    toolset_presets: dict[str, ToolSetPreset] = field(default_factory=dict)

    def preset_names(self) -> str:
        """Every name ``preset`` accepts, for a violation's ``expected``."""
        return ", ".join([*sorted(self.toolset_presets), *sorted(self.presets)])

    def add_tool(self, tool_cls: type[Tool[Any, Any]]) -> None:
        fq_id = tool_cls.fq_id()
        if not valid_tool_id(fq_id):
            raise ValueError(f"invalid tool id {fq_id!r}: segments must match [A-Za-z0-9_-]+")
        if fq_id in self.tools:
            if type(self.tools[fq_id].tool) is tool_cls:
                return
            raise ValueError(f"tool {fq_id} is already registered by another class")
        tool = tool_cls()
        self.tools[fq_id] = Registered(tool, ErasedTool(tool))
