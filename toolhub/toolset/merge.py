"""The configuration merge pipeline: baseline > external (MCP) > hub tools, then the capability
filter. On a clash of id or client name the higher-priority source wins and the other is
skipped, so adding an MCP server can never shadow a tool the client configured.

The baseline is the config's ``tools:``, the default tool set when it has none, or — when
``preset`` names a tool-set preset — the preset's list with the config's own entries laid over
it. Every path that takes a config (``Session.embedded``/``connect``, the gateway, the CLI)
builds through here, so a preset behaves the same everywhere."""

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


def baseline_tools(config: ToolSetConfig, registry: Registry) -> list[ToolConfig]:
    """The tools a config asks for, before the capability filter.

    With a tool-set preset: the preset's entries in order, then each of the config's entries
    either is laid over the preset entry with its id (``_overlay``) or, with a new id, is added
    at the end."""
    preset = registry.toolset_presets.get(config.preset)
    if preset is None:
        if config.tools is not None:
            return list(config.tools)
        return [ToolConfig(id=i) for i in registry.default_tools if i in registry.tools]
    entries = list(preset.tools)
    position = {entry.id: n for n, entry in enumerate(entries)}
    for own in config.tools or []:
        if own.id not in position:
            position[own.id] = len(entries)
            entries.append(own)
            continue
        entries[position[own.id]] = _overlay(entries[position[own.id]], own)
    return entries


def _overlay(base: ToolConfig, own: ToolConfig) -> ToolConfig:
    """``base`` with what ``own`` says: its ``params`` and ``rename`` keys win over the base's,
    and every other field it gives (not null) replaces the base's. Judged by value, not by
    which fields were set, because a config reaches workers serialized, every field present."""
    merged = base.model_dump()
    for key, value in own.model_dump().items():
        if key in ("params", "rename"):
            if value:
                merged[key] = {**(merged[key] or {}), **value}
        elif value is not None:
            merged[key] = value
    return ToolConfig.model_validate(merged)


def merge(
    config: ToolSetConfig,
    registry: Registry,
    external: Sequence[ExternalSpec] = (),
    hub: Sequence[ExternalSpec] = (),
) -> Merged:
    mode = config.mode
    tools = baseline_tools(config, registry)
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
