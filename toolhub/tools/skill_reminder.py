"""The skill-discovery reminder: when a call touches a path, announce ``SKILL.md`` files in the
skill folders of that path's directory and its ancestors, each skill once per session.

A monorepo keeps skills next to the code they are about (``pkg/api/.claude/skills/...``); the
model learns of them when it starts working there rather than all up front.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from toolhub.backends.workspace import Workspace
from toolhub.core import Container, State, TemplateRenderer, ToolKind, ToolOutput
from toolhub.core.requirements import Expr, Kind

from .skills import split_front_matter

SKILL_DIRS = (".toolhub/skills", ".agents/skills", ".claude/skills")
MAX_PER_REMINDER = 10
DESCRIPTION_CHARS = 200


class AnnouncedSkills(BaseModel):
    resource_id: ClassVar[str] = "main.announced_skills"

    paths: list[str] = Field(default_factory=list)


def touched_paths(value: Any) -> list[str]:
    """Workspace-relative paths an output names: ``path``, and ``changes[].path`` (patches)."""
    if not isinstance(value, dict):
        return []
    found = [value["path"]] if isinstance(value.get("path"), str) else []
    for change in value.get("changes") or []:
        if isinstance(change, dict) and isinstance(change.get("path"), str):
            found.append(change["path"])
    return found


def skills_near(ws: Workspace, path: Path) -> Iterator[Path]:
    """``SKILL.md`` files in the skill folders of ``path`` (or its directory) and its ancestors
    up to the workspace root, nearest first. This runs after every read, edit and listing, so
    the walk up is plain string and ``stat`` work (pathlib's per-level objects cost a third of
    a small ``read_file`` call)."""
    folder = str(path if path.is_dir() else path.parent)
    while ws.contains(Path(folder)):
        for skills_dir in SKILL_DIRS:
            base = os.path.join(folder, skills_dir)
            if os.path.isdir(base):
                for skill in sorted(Path(base).glob("*/SKILL.md")):
                    real = skill.resolve()
                    if ws.contains(real) and real.is_file():
                        yield real
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


class SkillDiscoveryReminder:
    requires: Expr = Kind(ToolKind.READ) | Kind(ToolKind.EDIT) | Kind(ToolKind.LIST_DIR)
    state_models = (AnnouncedSkills,)

    def collect(self, container: Container, output: ToolOutput) -> list[str]:
        ws = container.get(Workspace)
        paths = touched_paths(output.value)
        if ws is None or not paths:
            return []
        found: list[Path] = []
        for rel in paths:
            target = (ws.root / rel).resolve()
            if ws.contains(target) and target.exists():
                found += [s for s in skills_near(ws, target) if s not in found]
        if not found:
            return []
        fresh: list[str] = []

        def remember(state: AnnouncedSkills) -> AnnouncedSkills:
            known = set(state.paths)
            fresh[:] = [ws.display(s) for s in found if ws.display(s) not in known]
            fresh[:] = fresh[:MAX_PER_REMINDER]
            return state.model_copy(update={"paths": [*state.paths, *fresh]}) if fresh else state

        container.update(State[AnnouncedSkills], remember)
        if not fresh:
            return []
        lines = [_describe(ws.root / rel, rel) for rel in fresh]
        renderer = container.get(TemplateRenderer)
        loader = renderer.by_kind.get(ToolKind.SKILL.value) if renderer is not None else None
        how = f"Load one with `{loader}`" if loader else "Read its SKILL.md"
        return [
            "Skills are available for the files you are working on:\n"
            + "\n".join(lines)
            + f"\n{how} when it applies to your task."
        ]


def _describe(skill_file: Path, shown: str) -> str:
    try:
        meta, _ = split_front_matter(skill_file.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        meta = {}
    name = str(meta.get("name") or skill_file.parent.name).strip()
    description = " ".join(str(meta.get("description") or "").split())[:DESCRIPTION_CHARS]
    return f"- {name}: {description} ({shown})" if description else f"- {name} ({shown})"


REMINDERS = [SkillDiscoveryReminder()]
