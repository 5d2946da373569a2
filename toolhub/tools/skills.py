"""``skill``: load a skill's instructions (a ``SKILL.md`` in one of the workspace's skill folders).

Skills are folders like ``.toolhub/skills/<name>/SKILL.md`` (also ``.agents/skills`` and
``.claude/skills``) whose YAML front matter gives a ``name`` and a one-line ``description``. The
model learns which skills exist from this tool's description and, again, from the error when it
asks for an unknown one.
The catalog is read from disk on every use, so a skill added mid-session is seen at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from toolhub.backends.workspace import Workspace
from toolhub.core import ListContext, Params, Tool, ToolContext, ToolError, ToolKind

SKILL_FILE = "SKILL.md"


class SkillParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dirs: list[str] = Field(
        default_factory=lambda: [".toolhub/skills", ".agents/skills", ".claude/skills"],
        description="Skill folders, in precedence order (the first skill of a name wins).",
    )
    max_chars: int = Field(60_000, ge=1, description="Longest SKILL.md body returned.")
    max_files: int = Field(50, ge=0, description="Supporting files listed per skill.")
    max_listed: int = Field(100, ge=0, description="Skills listed in the description.")


@dataclass(frozen=True, slots=True)
class SkillInfo:
    name: str
    description: str
    file: Path
    body: str


def split_front_matter(text: str) -> tuple[dict[str, object], str]:
    """(front matter, body). Text without a ``---`` block, or with one that is not a YAML
    mapping, has empty front matter and is all body."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            try:
                data = yaml.safe_load("".join(lines[1:end]))
            except yaml.YAMLError:
                return {}, text
            if not isinstance(data, dict):
                return {}, text
            return data, "".join(lines[end + 1 :]).lstrip("\n")
    return {}, text


class SkillCatalog:
    """The skills of one workspace, by name, as they are on disk now."""

    def __init__(self, skills: list[SkillInfo]) -> None:
        self.skills = skills

    @classmethod
    def scan(cls, workspace: Workspace, dirs: list[str]) -> SkillCatalog:
        found: dict[str, SkillInfo] = {}
        for folder in dirs:
            base = (workspace.root / folder).resolve()
            if not workspace.contains(base) or not base.is_dir():
                continue
            for candidate in sorted(base.glob(f"*/{SKILL_FILE}")):
                real = candidate.resolve()
                if not workspace.contains(real) or not real.is_file():
                    continue
                meta, body = split_front_matter(real.read_text(encoding="utf-8", errors="replace"))
                name = str(meta.get("name") or candidate.parent.name).strip()
                description = " ".join(str(meta.get("description") or "").split())
                found.setdefault(name.lower(), SkillInfo(name, description, real, body))
        return cls(list(found.values()))

    def find(self, name: str) -> SkillInfo | None:
        wanted = name.strip().lower()
        return next((s for s in self.skills if s.name.lower() == wanted), None)

    def listing(self, limit: int) -> str:
        if not self.skills:
            return "No skills are installed in this workspace."
        lines = [
            f"- {s.name}: {s.description}" if s.description else f"- {s.name}"
            for s in self.skills[:limit]
        ]
        if len(self.skills) > limit:
            lines.append(f"- ... and {len(self.skills) - limit} more")
        return "Available skills:\n" + "\n".join(lines)


class SkillArgs(BaseModel):
    name: str = Field(min_length=1, description="The skill to load, as listed.")


class SkillOutput(BaseModel):
    name: str
    description: str
    path: str
    base_dir: str
    content: str
    truncated: bool = False
    files: list[str] = Field(default_factory=list)

    def model_text(self) -> str:
        text = f"Skill `{self.name}` ({self.path}); its files are relative to {self.base_dir}/\n\n"
        text += self.content
        if self.truncated:
            text += "\n\n[SKILL.md truncated]"
        if self.files:
            text += "\n\nFiles in this skill:\n" + "\n".join(f"- {f}" for f in self.files)
        return text


class Skill(Tool[SkillArgs, SkillOutput]):
    id = "skill"
    kind = ToolKind.SKILL
    params_model = SkillParams
    description_template = (
        "Load a skill: task-specific instructions (and helper files) kept in the workspace. "
        "Load the matching skill before starting a task it covers, then follow it."
    )

    def description(self, ctx: ListContext) -> str:
        """The template, plus the skills found in the session's workspace (when the listing
        context carries the session's container)."""
        text = super().description(ctx)
        workspace = ctx.container.get(Workspace) if ctx.container is not None else None
        if workspace is None:
            return text
        params = ctx.params if isinstance(ctx.params, SkillParams) else SkillParams()
        catalog = SkillCatalog.scan(workspace, params.dirs)
        return f"{text}\n\n{catalog.listing(params.max_listed)}"

    def run(self, ctx: ToolContext, args: SkillArgs) -> SkillOutput:
        params = ctx.container.get_or_default(Params[SkillParams])
        workspace = ctx.container.require(Workspace)
        catalog = SkillCatalog.scan(workspace, params.dirs)
        skill = catalog.find(args.name)
        if skill is None:
            raise ToolError.not_found(
                f"there is no skill named `{args.name}`. {catalog.listing(params.max_listed)}",
                available=[s.name for s in catalog.skills],
            )
        folder = skill.file.parent
        files = sorted(
            str(p.relative_to(folder))
            for p in folder.rglob("*")
            if p.is_file() and p != skill.file and not p.name.startswith(".")
        )
        return SkillOutput(
            name=skill.name,
            description=skill.description,
            path=workspace.display(skill.file),
            base_dir=workspace.display(folder),
            content=skill.body[: params.max_chars],
            truncated=len(skill.body) > params.max_chars,
            files=files[: params.max_files],
        )


TOOLS: list[type[Tool[Any, Any]]] = [Skill]
