"""The skill-discovery reminder: a read names the ``SKILL.md`` files in the skill folders of the
file's directory and its ancestors up to the workspace root, nearest first, each once per
session; nothing outside the workspace is named."""

from __future__ import annotations

from pathlib import Path

from toolhub import Session

HEADER = "Skills are available for the files you are working on:"


def _skill(folder: Path, name: str, description: str) -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody.\n")
    return path


def _announced(text: str) -> list[str]:
    if HEADER not in text:
        return []
    lines = text.split(HEADER, 1)[1].splitlines()
    return [line.split(":")[0].removeprefix("- ") for line in lines if line.startswith("- ")]


def test_nearest_first_once_per_session_and_only_the_files_own_ancestors(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    code = root / "pkg" / "api" / "src"
    code.mkdir(parents=True)
    (code / "a.py").write_text("x = 1\n")
    (root / "pkg" / "web").mkdir()
    (root / "pkg" / "web" / "b.py").write_text("y = 2\n")
    _skill(root / "pkg" / "api" / ".claude" / "skills", "api-style", "How the API is written.")
    _skill(root / ".toolhub" / "skills", "repo-wide", "Rules for the whole repo.")
    _skill(root / "pkg" / "web" / ".agents" / "skills", "web-only", "For the web package.")
    _skill(tmp_path / ".claude" / "skills", "outside", "Above the workspace root.")
    with Session.embedded(None, root) as session:
        first = session.call_sync("read_file", {"path": "pkg/api/src/a.py"})
        assert _announced(first.prompt_text) == ["api-style", "repo-wide"], first.prompt_text
        again = session.call_sync("read_file", {"path": "pkg/api/src/a.py"})
        assert _announced(again.prompt_text) == []
        sibling = session.call_sync("read_file", {"path": "pkg/web/b.py"})
        assert _announced(sibling.prompt_text) == ["web-only"]


def test_a_skill_linked_from_outside_the_workspace_is_not_named(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    outside = _skill(tmp_path / "elsewhere", "leaked", "Lives outside.")
    linked = root / ".claude" / "skills" / "leaked"
    linked.mkdir(parents=True)
    (linked / "SKILL.md").symlink_to(outside)
    with Session.embedded(None, root) as session:
        result = session.call_sync("read_file", {"path": "a.txt"})
        assert not result.is_error, result.prompt_text
        assert _announced(result.prompt_text) == []
