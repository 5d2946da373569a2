"""Behavior versions: a tool can change how it behaves without breaking clients pinned to the old
behavior. A managed tool lists its versions with a lifecycle; a preset pins versions for many
tools at once; resolution is per-tool override > preset > ``current``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

CURRENT = "current"


class Lifecycle(StrEnum):
    ACTIVE = "active"
    DEPRECATED = "deprecated"
    REMOVAL_CANDIDATE = "removal_candidate"


@dataclass(frozen=True, slots=True)
class BehaviorVersion:
    version: str
    lifecycle: Lifecycle = Lifecycle.ACTIVE
    summary: str = ""
    replacement: str | None = None


@dataclass(frozen=True, slots=True)
class VersionWarning:
    tool: str
    version: str
    message: str


@dataclass(frozen=True, slots=True)
class Resolved:
    """The outcome of resolving one tool's version: a version (None for unmanaged tools), an
    optional deprecation warning, or an error message listing what is supported."""

    version: str | None
    warning: VersionWarning | None = None
    error: str | None = None


def resolve_version(
    fq_id: str,
    versions: Sequence[BehaviorVersion],
    override: str | None,
    preset: Mapping[str, str] | None,
) -> Resolved:
    if not versions:
        if override is not None and override != CURRENT:
            return Resolved(None, error=f"{fq_id} has no behavior versions; remove `version`")
        return Resolved(None)
    by_name = {v.version: v for v in versions}
    supported = ", ".join(sorted(by_name))
    wanted = override or (preset or {}).get(fq_id) or CURRENT
    if wanted not in by_name:
        if override is None and wanted != CURRENT:
            wanted = CURRENT  # a preset written for other tools falls back to current
        else:
            return Resolved(None, error=f"unknown version {wanted!r}; supported: {supported}")
        if wanted not in by_name:
            return Resolved(None, error=f"no `current` version; supported: {supported}")
    info = by_name[wanted]
    if info.lifecycle is Lifecycle.REMOVAL_CANDIDATE:
        return Resolved(
            None,
            error=f"version {wanted!r} is scheduled for removal; supported: {supported}",
        )
    if info.lifecycle is Lifecycle.DEPRECATED:
        note = f"; use {info.replacement!r}" if info.replacement else ""
        return Resolved(
            wanted, VersionWarning(fq_id, wanted, f"{fq_id} version {wanted!r} is deprecated{note}")
        )
    return Resolved(wanted)
