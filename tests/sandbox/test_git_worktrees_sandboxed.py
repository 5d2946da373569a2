"""``task``'s ``isolation: worktree`` runs ``git worktree add`` in the workspace's repository,
and git runs what that repository says: a ``post-checkout`` hook, a smudge filter that
``.git/config`` names for paths ``.gitattributes`` marks. A model's command can plant both. So
toolhub's git runs hooks-off and under the session's sandbox, with the scrubbed environment:
the planted code reaches nothing outside the workspace and learns no secret, and the worktree
is still made. The unconfined control shows the filter really runs when git is not confined.

Real git, real bubblewrap and the real Landlock fallback.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.sandbox.conftest import Layout, requires_bwrap
from toolhub import ToolError
from toolhub.backends.worktrees import GitWorktrees
from toolhub.sandbox import Mechanism, SandboxMode

pytestmark = requires_bwrap


def _git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=ws, check=True)


def _hostile_repo(layout: Layout) -> None:
    """A repository whose checkout runs a hook and a filter that try every way out."""
    ws, outside, other = layout.ws, layout.outside, layout.other
    _git(ws, "init", "-q")
    (ws / "code.txt").write_text("payload\n")
    (ws / ".gitattributes").write_text("*.txt filter=evil\n")
    _git(ws, "add", "code.txt", ".gitattributes")
    _git(ws, "commit", "-qm", "init")
    hook = ws / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\necho ran > {outside}/hook-ran\n")
    hook.chmod(0o755)
    smudge = "; ".join(
        [
            f"echo ran > {outside}/filter-ran",
            f"env > {ws}/filter-env.txt",
            f"cat {other}/notes.txt > {ws}/stolen.txt",
            f"cat /proc/{os.getpid()}/environ > {ws}/environ.txt",
            "cat",
        ]
    )
    _git(ws, "config", "filter.evil.smudge", f"sh -c '{smudge}'")


@pytest.mark.parametrize("mechanism", [Mechanism.BWRAP, Mechanism.LANDLOCK])
def test_planted_hooks_and_filters_reach_nothing_outside(
    layout: Layout, secrets: dict[str, str], mechanism: Mechanism
) -> None:
    _hostile_repo(layout)
    policy = layout.policy(SandboxMode.WORKSPACE_WRITE, mechanism=mechanism)
    private = layout.base / "session" / "worktrees"
    made = GitWorktrees(layout.ws, private, layout.runner(policy)).add("agent-1")
    assert made == (private / "agent-1").resolve()
    assert (made / "code.txt").read_text() == "payload\n"
    assert not (layout.outside / "hook-ran").exists()
    assert not (layout.outside / "filter-ran").exists()
    leaked = "".join(
        p.read_text(errors="replace")
        for name in ("filter-env.txt", "stolen.txt", "environ.txt")
        if (p := layout.ws / name).exists()
    )
    assert (layout.ws / "filter-env.txt").exists(), "the filter ran, confined"
    assert "c0nfidential" not in leaked
    for value in secrets.values():
        assert value not in leaked


def test_unconfined_the_filter_runs_but_no_hook_and_no_secret(
    layout: Layout, secrets: dict[str, str]
) -> None:
    """The control: without a sandbox the planted filter does run (so the test above could
    fail), yet hooks stay off and toolhub's own credentials are not in its environment."""
    _hostile_repo(layout)
    made = GitWorktrees(layout.ws, layout.base / "wt", layout.runner(None)).add("agent-1")
    assert (made / "code.txt").read_text() == "payload\n"
    assert (layout.outside / "filter-ran").exists()
    assert not (layout.outside / "hook-ran").exists()
    env = (layout.ws / "filter-env.txt").read_text()
    assert secrets["TOOLHUB_REDIS_URL"] not in env and secrets["TOOLHUB_API_TOKEN"] not in env


def test_a_read_only_session_cannot_make_a_worktree(layout: Layout) -> None:
    """``read_only`` keeps the repository unwritable for toolhub's git too: a typed error."""
    _hostile_repo(layout)
    policy = layout.policy(SandboxMode.READ_ONLY)
    worktrees = GitWorktrees(layout.ws, layout.base / "session" / "wt", layout.runner(policy))
    with pytest.raises(ToolError) as caught:
        worktrees.add("agent-1")
    assert "git worktree add failed" in str(caught.value)
    assert not (layout.outside / "filter-ran").exists()
