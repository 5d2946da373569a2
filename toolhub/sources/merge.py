"""Runtime sources of external tools (MCP servers, HTTP registrations, remote hubs) and the one
merge that decides which of their tools a tool set shows.

Sources come and go at runtime (a server reconnects, a hub changes its list, a client PUTs a
tool), so the merge pipeline of ``toolhub.toolset.merge`` is re-run over every source on each
change: the baseline wins, then external sources (MCP, HTTP) in the order they were attached,
then hubs; the capability filter admits external tools only in mode ``all``. A source's tool
that loses a clash stays known here and reappears as soon as the winner goes away.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from toolhub.toolset import ExternalHandler, ExternalSpec, ToolSet, merge
from toolhub.toolset.registry import Registry

logger = logging.getLogger("toolhub.sources")

Priority = Literal["external", "hub"]

_of_lock = threading.Lock()


@dataclass(frozen=True)
class SourceTool:
    spec: ExternalSpec
    handler: ExternalHandler


class ExternalSources:
    """Every runtime source of one tool set. Get it with ``ExternalSources.of(toolset)``."""

    def __init__(self, toolset: ToolSet) -> None:
        self.toolset = toolset
        self._groups: dict[str, tuple[Priority, list[SourceTool]]] = {}
        self._installed: dict[str, SourceTool] = {}
        self._lock = threading.RLock()

    @classmethod
    def of(cls, toolset: ToolSet) -> ExternalSources:
        """The tool set's sources, kept in its container so every attacher shares them."""
        with _of_lock:
            found = toolset.container.get(ExternalSources)
            if found is None or found.toolset is not toolset:
                found = cls(toolset)
                toolset.container.insert(found)
            return found

    def set_group(
        self, key: str, tools: Sequence[SourceTool], priority: Priority = "external"
    ) -> list[str]:
        """Replace a source's whole tool list; returns the names that lost a clash."""
        with self._lock:
            self._groups[key] = (priority, list(tools))
            return self._sync(key)

    def put(self, key: str, tool: SourceTool, priority: Priority = "external") -> bool:
        """Add or replace one tool of a source; True when it is visible after the merge."""
        with self._lock:
            _, tools = self._groups.get(key, (priority, []))
            kept = [t for t in tools if t.spec.name != tool.spec.name]
            self._groups[key] = (priority, [*kept, tool])
            self._sync(key)
            return self._installed.get(tool.spec.name) is tool

    def remove(self, key: str, name: str | None = None) -> bool:
        """Drop one tool of a source (or the whole source); True when something was dropped."""
        with self._lock:
            if key not in self._groups:
                return False
            priority, tools = self._groups[key]
            if name is None:
                del self._groups[key]
            else:
                kept = [t for t in tools if t.spec.name != name]
                if len(kept) == len(tools):
                    return False
                self._groups[key] = (priority, kept)
            self._sync(key)
            return True

    def owner(self, name: str) -> str | None:
        """Which source the visible tool ``name`` comes from."""
        with self._lock:
            installed = self._installed.get(name)
            if installed is None:
                return None
            for key, (_, tools) in self._groups.items():
                if any(t is installed for t in tools):
                    return key
            return None

    def _sync(self, changed: str) -> list[str]:
        by_name: dict[str, SourceTool] = {}
        specs: dict[Priority, list[ExternalSpec]] = {"external": [], "hub": []}
        for level in ("external", "hub"):
            for priority, tools in self._groups.values():
                if priority != level:
                    continue
                for tool in tools:
                    by_name.setdefault(tool.spec.name, tool)
                    specs[level].append(tool.spec)
        external, hub = specs["external"], specs["hub"]
        merged = merge(self.toolset.config, Registry(), _unique(external), _unique(hub))
        visible = {spec.name for spec in [*merged.external, *merged.hub]}
        for name in list(self._installed):
            if name not in visible:
                self.toolset.unregister_external(name)
                del self._installed[name]
        for name in visible:
            tool = by_name[name]
            if self._installed.get(name) is not tool:
                self.toolset.register_external(tool.spec, tool.handler)
                self._installed[name] = tool
        _, tools = self._groups.get(changed, ("external", []))
        lost = [t.spec.name for t in tools if self._installed.get(t.spec.name) is not t]
        if lost:
            logger.info("external tools of %s not shown (name taken or mode): %s", changed, lost)
        return lost


def _unique(specs: list[ExternalSpec]) -> list[ExternalSpec]:
    """First spec per name: an earlier source keeps a name a later one also offers."""
    seen: set[str] = set()
    out: list[ExternalSpec] = []
    for spec in specs:
        if spec.name not in seen:
            seen.add(spec.name)
            out.append(spec)
    return out
