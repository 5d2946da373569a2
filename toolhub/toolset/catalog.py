"""What a builder starts from: tools, reminders, presets and the default tool list.

The toolset layer turns registered tools and a config into a ``ToolSet``; it never decides which
tools exist. The built-in catalog is ``toolhub.tools.CATALOG``, above this layer, and whoever
makes a builder (the session's default builder, a worker, the tenancy check, a host) hands it
over: ``ToolSetBuilder(CATALOG)``. A builder made without one holds only what is registered on
it and what the plugins add.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolhub.core import Reminder, Tool


@dataclass(frozen=True)
class Catalog:
    """Tools and what goes with them, as one value a builder registers at once."""

    tools: Sequence[type[Tool[Any, Any]]] = ()
    reminders: Sequence[Reminder] = ()
    #: behavior presets: a name and the versions it pins (``preset: legacy-1``)
    presets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: tool-set presets: a name and ``{"description": ..., "tools": [...]}`` (``preset: coding``)
    toolset_presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: the tools of a config that lists none
    default_tool_ids: Sequence[str] = ()
