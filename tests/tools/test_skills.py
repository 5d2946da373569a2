"""skill: loading SKILL.md files from the workspace's skill folders, and listing them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.servers.drive import call, snapshot
from toolhub.backends.workspace import Workspace
from toolhub.core import Container, ErrorKind, ListContext, Params, TemplateRenderer, ToolContext
from toolhub.tools.skills import Skill, SkillOutput, SkillParams

PDF_SKILL = """---
name: pdf-tools
description: >
  Fill and merge PDF forms
  with the bundled scripts.
---

# PDF tools

Run `scripts/fill.py FORM DATA`.
"""


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, ".toolhub/skills/pdf/SKILL.md", PDF_SKILL)
    write(root, ".toolhub/skills/pdf/scripts/fill.py", "print('fill')\n")
    write(
        root, ".claude/skills/review/SKILL.md", "---\ndescription: Review a diff\n---\nSteps...\n"
    )
    write(root, ".claude/skills/pdf-tools/SKILL.md", "---\nname: pdf-tools\n---\nshadowed\n")
    write(root, ".agents/skills/plain/SKILL.md", "No front matter here.\n")
    write(root, ".agents/skills/broken/SKILL.md", "---\n: [unclosed\n---\nbody\n")
    write(root, ".agents/skills/notaskill/README.md", "nothing\n")
    return root


def context(root: Path, **params: Any) -> ToolContext:
    container = Container()
    container.insert(Workspace(root))
    if params:
        container.insert(SkillParams(**params), Params[SkillParams])
    return ToolContext(call_id="k1", container=container)


def load(ctx: ToolContext, name: str) -> SkillOutput:
    out = call(Skill(), ctx, {"name": name})[1]
    assert out.error is None and out.output is not None, out.error
    return out.output.parse(SkillOutput)


def test_skill_is_loaded_with_its_files(workspace: Path) -> None:
    skill = load(context(workspace), "PDF-Tools")
    assert skill.name == "pdf-tools"
    assert skill.description == "Fill and merge PDF forms with the bundled scripts."
    assert skill.path == ".toolhub/skills/pdf/SKILL.md" and skill.base_dir == ".toolhub/skills/pdf"
    assert skill.content.startswith("# PDF tools") and "---" not in skill.content
    assert skill.files == ["scripts/fill.py"]


def test_names_default_to_the_folder_and_bad_front_matter_is_body(workspace: Path) -> None:
    ctx = context(workspace)
    assert load(ctx, "review").description == "Review a diff"
    assert load(ctx, "plain").content == "No front matter here.\n"
    assert load(ctx, "broken").content.startswith("---")


def test_unknown_skill_lists_the_available_ones(workspace: Path) -> None:
    before = snapshot(workspace)
    out = call(Skill(), context(workspace), {"name": "nope"})[1]
    assert out.error is not None and out.error.kind is ErrorKind.NOT_FOUND
    assert "- pdf-tools: Fill and merge PDF forms" in out.error.detail
    assert out.error.details == {"available": ["pdf-tools", "broken", "plain", "review"]}
    bad = call(Skill(), context(workspace), {"name": ""})[1]
    assert bad.error is not None and bad.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert snapshot(workspace) == before


def test_traversal_names_are_just_unknown(workspace: Path) -> None:
    out = call(Skill(), context(workspace), {"name": "../../etc"})[1]
    assert out.error is not None and out.error.kind is ErrorKind.NOT_FOUND


def test_skills_outside_the_workspace_are_ignored(workspace: Path, tmp_path: Path) -> None:
    write(tmp_path, "elsewhere/evil/SKILL.md", "---\nname: evil\n---\nsteal\n")
    (workspace / ".agents/skills/evil").symlink_to(tmp_path / "elsewhere/evil")
    out = call(Skill(), context(workspace), {"name": "evil"})[1]
    assert out.error is not None and out.error.kind is ErrorKind.NOT_FOUND


def test_truncation_and_custom_dirs(workspace: Path) -> None:
    skill = load(context(workspace, max_chars=5), "pdf-tools")
    assert skill.content == "# PDF" and skill.truncated
    only_claude = context(workspace, dirs=[".claude/skills"])
    assert load(only_claude, "pdf-tools").content == "shadowed\n"


def test_description_lists_skills_when_the_container_is_known(workspace: Path) -> None:
    container = context(workspace).container
    listing = ListContext(TemplateRenderer(), None, "skill", {}, container)
    text = Skill().description(listing)
    assert text.startswith("Load a skill")
    assert "Available skills:\n- pdf-tools: Fill and merge PDF forms" in text
    assert "- review: Review a diff" in text
    bare = ListContext(TemplateRenderer(), None, "skill", {})
    assert "Available skills" not in Skill().description(bare)
    empty = Container()
    empty.insert(Workspace(workspace / ".toolhub/skills/pdf/scripts"))
    none = ListContext(TemplateRenderer(), None, "skill", {}, empty)
    assert Skill().description(none).endswith("No skills are installed in this workspace.")
