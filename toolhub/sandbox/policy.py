"""What a sandboxed command may touch: one immutable value, decided once per session.

The policy says *what* is allowed; ``bwrap.py`` turns it into mounts and namespaces. Keeping the
two apart lets the policy be built (and tested, and logged) where the session is known — the
workspace, its private tmp, the other sessions' directories — without knowing how it is
enforced.

Modes follow Codex CLI's, so a config written for one reads the same in the other:

* ``read_only``: the whole filesystem readable (minus the hidden paths), nothing writable but a
  fresh ``/tmp`` that vanishes when the command ends.
* ``workspace_write`` (the default once a sandbox is asked for): as ``read_only``, plus the
  workspace and the session's private tmp are writable; configured paths inside the workspace
  (``.git/hooks``, ``.git/config``) stay read-only, since a hook or a ``core.fsmonitor`` line
  planted there would run later *outside* the sandbox, in whoever next runs git.
* ``full``: no confinement at all — an explicit opt-out, logged once. The environment is still
  scrubbed when ``scrub_env`` is set.

Network is off by default in both confined modes. A command that can open sockets can reach the
worker's Redis (and with it every session's calls and state) even without the URL, scan the
pod's network, and send anywhere whatever it can read; Codex and Claude Code both default to no
network for the same reason. Commands that need it (``pip install``) get it by config, per tool
set.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path


class SandboxMode(StrEnum):
    READ_ONLY = "read_only"
    WORKSPACE_WRITE = "workspace_write"
    FULL = "full"


#: Paths inside the workspace that stay read-only in ``workspace_write``: what git runs on its
#: own (hooks) or is told to run by config (``core.fsmonitor``, ``core.hooksPath``).
DEFAULT_READ_ONLY = (".git/hooks", ".git/config")


def default_hidden() -> tuple[Path, ...]:
    """Where workers usually keep credentials: mounted secrets (Kubernetes service-account
    tokens), the container runtime's socket (a unix socket is reachable without network), and
    the worker user's cloud, ssh and registry credentials. Hidden only where they exist."""
    home = Path(os.path.expanduser("~"))
    in_home = (
        ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".ssh", ".gnupg",
        ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".toolhub",
    )  # fmt: skip
    system = ("/run/secrets", "/var/run/secrets", "/run/docker.sock", "/var/run/docker.sock")
    return (*(home / name for name in in_home), *map(Path, system))


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """The confinement of every command one ``ProcessRunner`` starts.

    Paths are host paths; the sandbox sees each at the same place, so the paths a tool prints
    are the paths the model can use. ``tmp_dir`` is the session's private ``/tmp`` (kept across
    the session's commands, as a shared ``/tmp`` would be); ``None`` gives each command a fresh
    one. ``hidden`` paths appear empty; relative ``read_only`` paths are taken under the
    workspace. ``env`` names worker variables passed through on top of the allowlist
    (``environment.py``); a trailing ``*`` matches a prefix.
    """

    workspace: Path
    mode: SandboxMode = SandboxMode.WORKSPACE_WRITE
    tmp_dir: Path | None = None
    read_only: tuple[Path, ...] = tuple(Path(p) for p in DEFAULT_READ_ONLY)
    hidden: tuple[Path, ...] = field(default_factory=default_hidden)
    network: bool = False
    env: tuple[str, ...] = ()
    scrub_env: bool = True

    @property
    def confined(self) -> bool:
        return self.mode is not SandboxMode.FULL

    def read_only_paths(self) -> tuple[Path, ...]:
        return tuple(p if p.is_absolute() else self.workspace / p for p in self.read_only)

    def with_hidden(self, paths: Iterable[Path | str]) -> SandboxPolicy:
        """The same policy hiding ``paths`` too (another session's workspace, a state dir)."""
        extra = tuple(Path(p) for p in paths if Path(p) not in self.hidden)
        return replace(self, hidden=(*self.hidden, *extra))

    def unconfined(self) -> SandboxPolicy:
        """The same policy in ``full`` mode: what a worker that may not refuse falls back to."""
        return replace(self, mode=SandboxMode.FULL)
