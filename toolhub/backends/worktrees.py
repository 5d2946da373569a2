"""Private git worktrees of the workspace, for sub-agents that must not touch the caller's tree.

``task`` with ``isolation: worktree`` gives its sub-agent a ``git worktree add --detach`` of
the workspace's ``HEAD`` in a directory of the session's own (``<session_dir>/worktrees/<id>``),
so its edits land on a separate checkout the caller can inspect, diff or throw away. A
workspace that is not inside a git repository is refused with a typed error instead of
silently sharing the caller's files. Git runs with a fixed argument list (never a shell), with
its own timeout and without the user's prompts.

Git runs what the repository tells it to: hooks (``post-checkout`` runs on ``worktree add``),
``core.fsmonitor``, and the smudge filters ``.git/config`` names for the paths
``.gitattributes`` marks. A model's command can plant any of those in the workspace, so git
runs as one of the session's commands would: under its sandbox (``ProcessRunner.confine``, the
worktrees directory writable besides the workspace) with the scrubbed environment, and with
hooks and the fsmonitor switched off on the command line. In a sandboxed session the repository
must therefore lie inside the workspace, as it must for the session's own ``git`` commands.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from toolhub.core import ErrorKind, ToolError
from toolhub.errors import ErrorCode
from toolhub.sandbox.environment import TOOLHUB_SECRETS

from .process import ProcessRunner

GIT_TIMEOUT_S = 60.0
#: Ahead of every git command: no hook and no fsmonitor command runs, whatever the
#: repository's config says (command-line config wins over the repository's).
SAFE_GIT = ("git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class GitWorktrees:
    """Creates worktrees of ``workspace`` under ``directory``, running git through ``runner``
    (the session's, so under its sandbox; ``None``: unconfined, without toolhub's secrets).
    Thread-safe: git serializes changes to its worktree list itself."""

    __slots__ = ("directory", "runner", "workspace")

    def __init__(
        self, workspace: Path, directory: Path, runner: ProcessRunner | None = None
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.directory = Path(directory)
        self.runner = runner

    def add(self, name: str) -> Path:
        """A new detached worktree of the workspace's ``HEAD`` named ``name``; its path."""
        if not _NAME.match(name):
            raise ToolError.invalid_arguments(f"bad worktree name {name!r}")
        top = self._toplevel()
        if top is None:
            raise ToolError(
                ErrorKind.INVALID_ARGUMENTS,
                f"isolation `worktree` needs a git repository, and the workspace {self.workspace} "
                "is not inside one (with at least one commit; in a sandboxed session, one inside "
                "the workspace); use isolation `none`",
                {"code": ErrorCode.NOT_A_GIT_REPOSITORY.value},
            )
        target = self.directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        done = self._git("worktree", "add", "--detach", str(target), "HEAD", cwd=top)
        if done.returncode != 0:
            raise ToolError.execution(
                f"git worktree add failed: {done.stderr.strip()[-500:]}", exit_code=done.returncode
            )
        # The workspace may be a subdirectory of the repository: keep the sub-agent there.
        return (target / self.workspace.relative_to(top)).resolve()

    def remove(self, path: Path) -> None:
        """Remove a worktree made here (one whose sub-agent never started); best effort."""
        top = self._toplevel()
        target = Path(path).resolve()
        if top is None or not target.is_relative_to(self.directory.resolve()):
            return
        root = self.directory.resolve() / target.relative_to(self.directory.resolve()).parts[0]
        self._git("worktree", "remove", "--force", str(root), cwd=top)

    def _toplevel(self) -> Path | None:
        if not self.workspace.is_dir():
            return None
        found = self._git("rev-parse", "--show-toplevel", cwd=self.workspace)
        if found.returncode != 0:
            return None
        head = self._git("rev-parse", "--verify", "--quiet", "HEAD", cwd=self.workspace)
        return Path(found.stdout.strip()).resolve() if head.returncode == 0 else None

    def _git(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        argv, env = self._confined([*SAFE_GIT, *args], cwd)
        env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
        try:
            return subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except FileNotFoundError:
            raise ToolError.custom(
                ErrorCode.MISSING_BINARY, "git is not installed, so no worktree can be made"
            ) from None
        except subprocess.TimeoutExpired:
            raise ToolError.timeout(
                f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s"
            ) from None

    def _confined(self, argv: list[str], cwd: Path) -> tuple[list[str], dict[str, str]]:
        if self.runner is None:
            return argv, {k: v for k, v in os.environ.items() if k not in TOOLHUB_SECRETS}
        if self.runner.sandbox is not None and self.runner.sandbox.confined:
            self.directory.mkdir(parents=True, exist_ok=True)  # bound into the sandbox
        return self.runner.confine(argv, cwd, writable=[self.directory])
