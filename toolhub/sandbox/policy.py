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


class Mechanism(StrEnum):
    """What enforces a confined policy: bubblewrap where it can run, else Landlock
    (``landlock.py``; weaker, see there); ``auto`` picks in that order."""

    AUTO = "auto"
    BWRAP = "bwrap"
    LANDLOCK = "landlock"


#: Paths inside the workspace that stay read-only in ``workspace_write``: what git runs on its
#: own (hooks) or is told to run by config (``core.fsmonitor``, ``core.hooksPath``).
DEFAULT_READ_ONLY = (".git/hooks", ".git/config")


#: Readable (and executable) below these in both confined modes, when they exist. Not
#: ``/run``, ``/var``, ``/home``, ``/root``, ``/srv``, ``/mnt`` or the host's ``/tmp``:
#: secrets, other sessions' workspaces and state live there. A config adds paths (``read``).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")


def path_prefixes(path_env: str) -> list[str]:
    """What the ``PATH`` directories need readable: each one's installation prefix when it is
    a ``bin``, ``sbin`` or ``shims`` directory (a venv, ``/usr/local``; pyenv's shims exec into
    their prefix), else the directory itself."""
    out = []
    for entry in path_env.split(":"):
        if not entry.startswith("/"):
            continue
        path = Path(entry)
        named = path.name in ("bin", "sbin", "shims") and path.parent != Path("/")
        out.append(str(path.parent) if named else entry)
    return list(dict.fromkeys(out))


#: Files under ``/etc`` (a readable root) that hold host credentials: password hashes and the
#: host's ssh keys. Unreadable to a non-root command anyway; a root worker's commands (uid 0,
#: no capabilities) could read them by their mode alone.
ETC_SECRETS = (
    "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/security/opasswd",
    "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
)  # fmt: skip


def default_hidden() -> tuple[Path, ...]:
    """Where workers usually keep credentials: toolhub's home (``$TOOLHUB_HOME`` wherever it
    is, and ``~/.toolhub``: the fleet key files, the holder's socket and secret, every
    session's state), mounted secrets (Kubernetes service-account tokens), the container
    runtime's socket (a unix socket is reachable without network), the worker user's cloud,
    ssh and registry credentials. Hidden only where they exist. (The host's password hashes and
    ssh keys, ``ETC_SECRETS``, are hidden by every policy, whatever its ``hidden`` says.)"""
    home = Path(os.path.expanduser("~"))
    in_home = (
        ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".ssh", ".gnupg",
        ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".toolhub",
    )  # fmt: skip
    system = ("/run/secrets", "/var/run/secrets", "/run/docker.sock", "/var/run/docker.sock")
    toolhub = os.environ.get("TOOLHUB_HOME")
    own = (Path(toolhub).expanduser(),) if toolhub else ()
    return (
        *own,
        *(home / name for name in in_home),
        *map(Path, system),
    )


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
    mechanism: Mechanism = Mechanism.AUTO
    #: More readable paths beyond the system dirs and the ``PATH`` prefixes (``SYSTEM_DIRS``).
    readable: tuple[Path, ...] = ()
    #: With ``network`` off: the hosts commands may still reach, through the egress proxy
    #: (``proxy.py``). Empty: no network at all.
    allowed_hosts: tuple[str, ...] = ()
    #: More writable directories beyond the workspace and the private tmp, for toolhub's own
    #: helpers only (the worktrees ``git worktree add`` creates); never from a config.
    writable: tuple[Path, ...] = ()

    @property
    def egress(self) -> bool:
        """Network through the allowlist proxy (off, but some hosts allowed)."""
        return not self.network and bool(self.allowed_hosts)

    @property
    def confined(self) -> bool:
        return self.mode is not SandboxMode.FULL

    def readable_roots(self, path_env: str) -> list[str]:
        """Where a confined command may read: the system, the ``PATH`` prefixes, the config's
        extra paths (the workspace and the private tmp come on top)."""
        return list(
            dict.fromkeys([*SYSTEM_DIRS, *path_prefixes(path_env), *map(str, self.readable)])
        )

    def hidden_paths(self) -> tuple[Path, ...]:
        """What the mechanisms hide: ``hidden``, and always the host's ``ETC_SECRETS``."""
        return (*self.hidden, *map(Path, ETC_SECRETS))

    def read_only_paths(self) -> tuple[Path, ...]:
        return tuple(p if p.is_absolute() else self.workspace / p for p in self.read_only)

    def with_readable(self, paths: Iterable[Path | str]) -> SandboxPolicy:
        """The same policy with ``paths`` readable too (a language server's installation)."""
        extra = tuple(Path(p) for p in paths if Path(p) not in self.readable)
        return replace(self, readable=(*self.readable, *extra)) if extra else self

    def with_writable(self, paths: Iterable[Path | str]) -> SandboxPolicy:
        """The same policy with the directories ``paths`` writable too (and readable)."""
        extra = tuple(Path(p) for p in paths if Path(p) not in self.writable)
        return replace(self, writable=(*self.writable, *extra)) if extra else self

    def enforced_by(self, mechanism: Mechanism) -> SandboxPolicy:
        return replace(self, mechanism=mechanism)

    def unconfined(self) -> SandboxPolicy:
        """The same policy in ``full`` mode: what a worker that may not refuse falls back to."""
        return replace(self, mode=SandboxMode.FULL)
