"""``GitWorktrees``: a detached worktree of the workspace's HEAD in a private directory, the
workspace's subdirectory kept; a typed refusal outside a git repository (or one without a
commit); names that could be paths refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from toolhub import ToolError
from toolhub.backends.worktrees import GitWorktrees


def _repo(root: Path) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "sub").mkdir()
    (root / "sub" / "f.txt").write_text("base\n")
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
        cwd=root,
        check=True,
    )
    return root


def test_a_worktree_of_a_subdirectory_workspace(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    worktrees = GitWorktrees(repo / "sub", tmp_path / "private")
    made = worktrees.add("agent-1")
    assert made == (tmp_path / "private" / "agent-1" / "sub").resolve()
    assert (made / "f.txt").read_text() == "base\n"
    (made / "f.txt").write_text("changed\n")
    assert (repo / "sub" / "f.txt").read_text() == "base\n"


def test_not_a_repository_and_no_commit(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ToolError) as caught:
        GitWorktrees(plain, tmp_path / "private").add("agent-1")
    assert caught.value.code == "not_a_git_repository"
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=empty, check=True)
    with pytest.raises(ToolError) as no_commit:
        GitWorktrees(empty, tmp_path / "private").add("agent-1")
    assert no_commit.value.code == "not_a_git_repository"
    assert not (tmp_path / "private").exists()


def test_names_are_never_paths(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(ToolError):
            GitWorktrees(repo, tmp_path / "private").add(bad)
