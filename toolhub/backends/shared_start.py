"""Commands started in their session's shared sandbox: one long-lived bubblewrap sandbox per
session policy (``sandbox_host.py``) in which each command is a process of its own, instead of
a sandbox built and torn down per command; ``SandboxHosts`` keeps this process's sandboxes, one
per policy, and closes idle ones past ``MAX_SANDBOXES``.

Threat: sharing must not weaken what a command gets alone. So a command is hosted only where
every promise holds there too (``start_hosted`` lists the exceptions); it joins its own cgroup
and takes the OOM killer's first place before it execs, and a launcher lost meanwhile is
replaced, never reused.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from toolhub.sandbox import Mechanism, SandboxMode

from .cgroups import CommandCgroup
from .command_process import CommandProcess
from .command_shell import is_setuid, pidfds_work
from .limits import ResourceLimits
from .oom import COMMAND_OOM_SCORE_ADJ, set_oom_score_adj
from .sandbox_host import HostLost, SandboxHost, StartRefused
from .sandbox_spawn import WORKSPACE_FD_PLACEHOLDER, launcher_argv, launcher_roots

if TYPE_CHECKING:
    from .process import ProcessRunner

logger = logging.getLogger("toolhub.sandbox")

#: Idle sandboxes are closed, oldest first, once a process has more sandboxes than this (a
#: worker serving many sessions keeps the busy ones; each costs a bwrap and a small Python
#: process).
MAX_SANDBOXES = 32


class SandboxHosts:
    """The sandboxes of this process, one per bwrap argv (that is, per policy)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[tuple[str, ...], SandboxHost] = {}

    def get(
        self, argv: Sequence[str], env: dict[str, str], *, workspace_fd: int | None = None
    ) -> SandboxHost:
        """The running sandbox of ``argv`` (and ``env``), started now if there is none, with
        ``workspace_fd`` in place of its placeholder (the caller keeps it open until then)."""
        key = (*argv, *(f"{k}={v}" for k, v in sorted(env.items())))
        with self._lock:
            host = self._hosts.get(key)
            if host is not None and not host.closed:
                self._hosts[key] = self._hosts.pop(key)  # most recently used last
                return host
            surplus = [h for h in self._hosts.values() if h.idle][
                : max(0, len(self._hosts) + 1 - MAX_SANDBOXES)
            ]
            host = SandboxHost(
                argv, env, on_closed=lambda h: self._forget(key, h), workspace_fd=workspace_fd
            )
            self._hosts[key] = host
        for old in surplus:
            old.close()
        return host

    def close_all(self) -> None:
        with self._lock:
            hosts = list(self._hosts.values())
        for host in hosts:
            host.close()

    def __len__(self) -> int:
        with self._lock:
            return sum(not h.closed for h in self._hosts.values())

    def _forget(self, key: tuple[str, ...], host: SandboxHost) -> None:
        with self._lock:
            if self._hosts.get(key) is host:
                del self._hosts[key]


#: The sandboxes this process shares between the commands of each session policy.
SHARED_SANDBOXES = SandboxHosts()


def start_hosted(
    runner: ProcessRunner,
    command: str,
    cwd: Path,
    limits: ResourceLimits,
    cgroup: CommandCgroup | None,
    ws_fd: int,
    extra_env: dict[str, str],
) -> CommandProcess | None:
    """The command started in the session's shared sandbox (``sandbox_host``), or None
    where that does not apply (docs/sandbox.md lists why): not bwrap, an egress proxy
    (its bridge runs per command), not ``workspace_write`` with a private tmp (a fresh
    tmpfs ``/tmp`` per command is the promise there), no command cgroup (leftovers of a
    command would outlive it in the shared pid namespace), a setuid bwrap (it drops the
    parent-death signal), no working pidfds, or ``shared_sandbox`` off."""
    policy = runner.sandbox
    if (
        not runner.shared_sandbox
        or policy is None
        or policy.mechanism is Mechanism.LANDLOCK
        or policy.mode is not SandboxMode.WORKSPACE_WRITE
        or policy.egress
        or policy.tmp_dir is None
        or cgroup is None
        or not pidfds_work()
    ):
        return None
    policy = policy.with_readable(launcher_roots())
    host_argv, env = runner.confined(
        policy, launcher_argv(), runner.root, workspace_fd=WORKSPACE_FD_PLACEHOLDER
    )
    if is_setuid(host_argv[0]):
        return None
    guard = [runner.guard[0], "--pdeathsig", "KILL"] if runner.guard else []
    last: HostLost | None = None
    for _ in range(2):  # a launcher lost meanwhile: the next try starts a new sandbox
        try:
            host = SHARED_SANDBOXES.get([*guard, *host_argv], env, workspace_fd=ws_fd)
            return host.start(
                [runner.shell, "-c", command],
                env={**env, **extra_env},  # the host's own env stays the same
                cwd=os.path.realpath(cwd),
                rlimits=limits.rlimits(nproc=runner.nproc_rlimit(cgroup)),
                join=functools.partial(_join_hosted, runner, cgroup),
            )
        except StartRefused as exc:
            last = exc
            break
        except HostLost as exc:
            last = exc
    logger.warning("shared sandbox unavailable, starting a sandbox for one command: %s", last)
    return None


def _join_hosted(runner: ProcessRunner, cgroup: CommandCgroup, pid: int) -> None:
    """A hosted command, before it execs: into its cgroup, and first in the OOM killer's
    line (the launcher's own value is the worker's)."""
    runner.cgroups.join(cgroup, pid)
    set_oom_score_adj(COMMAND_OOM_SCORE_ADJ, pid)
