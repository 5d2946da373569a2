"""The configuration merge pipeline: baseline > external (MCP) > hub tools, then the capability
filter. On a clash of id or client name the higher-priority source wins and the other is
skipped, so adding an MCP server can never shadow a tool the client configured."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolhub.core import ToolKind

from .config import ToolConfig, ToolSetConfig
from .external import ExternalSpec
from .registry import Registry


@dataclass(frozen=True)
class Merged:
    config: ToolSetConfig
    external: list[ExternalSpec]
    hub: list[ExternalSpec]
    skipped: list[str]


def baseline_kind(entry: ToolConfig, registry: Registry) -> ToolKind | None:
    if entry.kind is not None:
        return ToolKind.parse(entry.kind)
    registered = registry.tools.get(entry.id)
    return registered.tool.kind if registered is not None else None


def merge(
    config: ToolSetConfig,
    registry: Registry,
    external: Sequence[ExternalSpec] = (),
    hub: Sequence[ExternalSpec] = (),
) -> Merged:
    mode = config.mode
    tools = (
        config.tools
        if config.tools is not None
        else [ToolConfig(id=i) for i in registry.default_tools if i in registry.tools]
    )
    kept_tools = [t for t in tools if mode.allows(baseline_kind(t, registry))]
    taken = {t.client_name for t in kept_tools} | {t.id for t in kept_tools}
    skipped: list[str] = []
    kept_external: list[ExternalSpec] = []
    kept_hub: list[ExternalSpec] = []
    for source, out in ((external, kept_external), (hub, kept_hub)):
        for spec in source:
            if spec.name in taken:
                skipped.append(spec.name)
                continue
            if not mode.allows(ToolKind.OTHER, external=True):
                continue
            taken.add(spec.name)
            out.append(spec)
    return Merged(config.model_copy(update={"tools": kept_tools}), kept_external, kept_hub, skipped)
