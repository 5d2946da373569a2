"""Policy to Landlock: the fallback where bubblewrap cannot run.

bwrap needs root or unprivileged user namespaces. Restricted pods (the chart's own: uid 10001,
no capabilities, RuntimeDefault seccomp) usually have neither. Landlock needs no privilege at
all: a process restricts itself, and every process it starts inherits the restriction. So where
the probe finds bwrap unusable and the kernel has Landlock, commands run under a small exec
wrapper (``landlock_exec.py``: restrict, then ``execve`` the command's shell).

Landlock can only *allow*, never carve a hole in what it allowed. So hiding works by granting
reads only where they are needed: the system directories (``/usr``, ``/etc``, ...), the
directories on ``PATH``, the workspace and the private tmp. Another session's workspace,
toolhub's state and the worker's home are simply not granted. A hidden path inside a granted
directory is left out by granting that directory's other entries one by one (``grants``).

What Landlock gives besides files, by kernel ABI:

* ptrace scoping (every ABI): a confined command cannot attach to, or read
  ``/proc/<pid>/environ`` of, a process outside its domain, such as the worker;
* TCP ``connect`` and ``bind`` (ABI 4): denied when network is off. UDP and unix sockets are not
  covered;
* abstract unix sockets and signals (ABI 6): scoped to the domain, so a command cannot signal
  the worker.

What it cannot do that bwrap does: make ``.git/hooks`` read-only inside a writable workspace (a
rule cannot narrow a parent's grant); give the command its own ``/tmp`` path (``TMPDIR`` and
``HOME`` point into the private tmp instead); hide UDP or the host's process list. docs/sandbox.md
says so.

The system calls are in ``landlock_syscalls.py``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .landlock_syscalls import (
    EXECUTE,
    IOCTL_DEV,
    MAKE_DIR,
    MAKE_FIFO,
    MAKE_REG,
    MAKE_SOCK,
    MAKE_SYM,
    READ_DIR,
    READ_FILE,
    REFER,
    REMOVE_DIR,
    REMOVE_FILE,
    TRUNCATE,
    WRITE_FILE,
)
from .policy import SandboxMode, SandboxPolicy

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (
    WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM
)

#: The kernel views a command needs (``/proc/self``, ``/sys``), read only: a uid-0 command
#: without capabilities could otherwise write sysctls (``kernel.core_pattern``) and ``/sys``.
#: ptrace scoping keeps other processes' ``/proc/<pid>/environ`` closed.
KERNEL_VIEWS = ("/proc", "/sys")
#: The devices a command may use. The rest of ``/dev`` is not granted, not even its listing:
#: raw disks and loop devices (writable by uid 0 by their mode), and ``/dev/shm``, which every
#: session on the host would share (one session could list, read and overwrite another's
#: files there).
DEVICES = (
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
    "/dev/ptmx", "/dev/pts",
)  # fmt: skip

WRAPPER = Path(__file__).with_name("landlock_exec.py")
#: The environment variable that hands the wrapper its spec.
SPEC_ENV = "TOOLHUB_LANDLOCK_SPEC"


def grants(policy: SandboxPolicy, path_env: str) -> list[tuple[str, int]]:
    """(path, rights) the command gets: reads of the system, the ``PATH`` directories and the
    device views, writes in the workspace (``workspace_write``) and the private tmp, none in a
    hidden path."""
    hidden = [_real(p) for p in policy.hidden_paths()]
    workspace = _real(policy.workspace)
    writable = policy.mode is SandboxMode.WORKSPACE_WRITE
    out: list[tuple[str, int]] = []
    for root in policy.readable_roots(path_env):
        out += _readable(_real(root), hidden, READ)
    for root in KERNEL_VIEWS:
        out += _readable(_real(root), hidden, READ)
    out += [(d, READ | WRITE_FILE | IOCTL_DEV) for d in DEVICES if os.path.exists(d)]
    out.append((str(workspace), READ | WRITE | REFER | TRUNCATE if writable else READ))
    if policy.tmp_dir is not None:
        out.append((str(_real(policy.tmp_dir)), READ | WRITE | REFER | TRUNCATE))
    out += [(str(_real(p)), READ | WRITE | REFER | TRUNCATE) for p in policy.writable]
    return out


def _readable(root: Path, hidden: Sequence[Path], rights: int) -> list[tuple[str, int]]:
    """``root`` readable, except the hidden paths under it (their siblings granted one by one).
    A root the worker itself cannot reach (a ``PATH`` entry under another user's home) is
    skipped: there is nothing to grant."""
    if not os.path.exists(root) or any(_under(root, h) for h in hidden):
        return []
    inside = [h for h in hidden if _under(h, root)]
    if not inside:
        return [(str(root), rights)]
    out: list[tuple[str, int]] = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.is_symlink():
            continue  # its target is granted (or not) on its own
        out += _readable(entry, inside, rights)
    return out


def landlock_argv(
    policy: SandboxPolicy,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    connect_port: int | None = None,
    workspace_identity: tuple[int, int] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The command line that runs ``argv`` confined by ``policy`` with exactly ``env``, and the
    environment to start it with: ``env`` plus the wrapper's spec (``SPEC_ENV``), which holds
    the session's paths and the command's environment. Not on the command line: under Landlock
    every command can read every process's ``/proc/<pid>/cmdline``, while the wrapper's
    environment is closed to them (ptrace scoping), and the wrapper drops the spec before it
    execs the command. With
    network off, ``connect_port`` is the one TCP port it may still connect to (the egress
    proxy's on loopback). ``workspace_identity`` (``st_dev``, ``st_ino`` of the pinned
    workspace): the wrapper grants the workspace only if the directory it opens is that one."""
    if not policy.confined:
        raise ValueError("a full-mode policy runs without Landlock")
    spec = {
        "grants": grants(policy, env.get("PATH", "")),
        "network": policy.network,
        "connect_port": connect_port,
        "env": dict(env),
        "cwd": str(cwd if cwd is not None else policy.workspace),
        "pinned": {}
        if workspace_identity is None
        else {str(_real(policy.workspace)): list(workspace_identity)},
    }
    wrapper = [sys.executable, "-I", "-S", str(WRAPPER), "--", *argv]
    return wrapper, {**env, SPEC_ENV: json.dumps(spec)}


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(path)))


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents
