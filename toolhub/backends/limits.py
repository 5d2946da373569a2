"""Resource limits for commands: what one shell command may consume before the kernel stops it.

Limits are applied by a short shell prelude (``ulimit``, ``oom_score_adj``) that runs in the
child *before* the user's command, rather than by a Python ``preexec_fn``: ``preexec_fn`` runs
interpreter code between ``fork`` and ``exec``, which can deadlock in a process with threads (a
worker always has them). The prelude is plain shell, so nothing of ours runs in the child.

``memory_bytes`` and ``max_processes`` are held by the command's cgroup (``cgroups.py``) where
the host gives one; that holds for every user and lets a kill reach processes that left the
command's process group. Without a pids cgroup ``max_processes`` falls back to
``RLIMIT_NPROC``, which counts the whole user's processes and does not bind root; without a
memory cgroup only ``address_space_bytes`` (``RLIMIT_AS``) bounds a command's memory, per
process (docs/sandbox.md, "Kernel limits").
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

_GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """Per-command limits; ``None`` leaves a limit as the worker has it (the session's and
    the operator's cgroup ceilings still apply).

    ``max_processes`` counts processes (threads, under a cgroup) of the command itself when a
    pids cgroup is available, and of the whole user otherwise (``RLIMIT_NPROC`` semantics).
    ``memory_bytes``: the command's memory cgroup limit (resident memory, its processes
    together); past it the kernel OOM-kills the command.
    """

    cpu_seconds: int | None = None
    address_space_bytes: int | None = 8 * _GIB
    max_processes: int | None = 512
    file_size_bytes: int | None = None
    memory_bytes: int | None = 1 * _GIB

    def rlimits(self, *, nproc: bool = True) -> list[tuple[int, int, int]]:
        """``(resource, soft, hard)`` for each limit set, clamped to what this process's own
        hard limits allow (lowering a limit always succeeds; raising one past them would not).
        CPU: soft below hard, so SIGXCPU (nameable, catchable) comes before SIGKILL.
        ``nproc`` False: no ``RLIMIT_NPROC`` (a pids cgroup counts the command's own)."""
        out: list[tuple[int, int, int]] = []
        for rlimit, value in (
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_AS, self.address_space_bytes),
            (resource.RLIMIT_NPROC, self.max_processes if nproc else None),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
        ):
            if value is None:
                continue
            _, ceiling = resource.getrlimit(rlimit)
            soft = max(1, value)
            hard = soft + 1 if rlimit == resource.RLIMIT_CPU else soft
            if ceiling != resource.RLIM_INFINITY:
                soft, hard = min(soft, ceiling), min(hard, ceiling)
            out.append((rlimit, soft, hard))
        return out

    def ulimit_prelude(self, *, nproc: bool = True) -> str:
        """Shell commands that set ``rlimits`` (hard and soft), so ``ulimit`` never fails and
        never prints an error."""
        parts: list[str] = []
        for rlimit, soft, hard in self.rlimits(nproc=nproc):
            flag, unit = _ULIMIT_FLAGS[rlimit]
            # Soft first: lowering the hard limit below the current soft one is refused.
            soft, hard = max(1, soft // unit), max(1, hard // unit)
            parts.append(f"ulimit -S{flag} {soft}; ulimit -H{flag} {hard}")
        return "; ".join(parts)


#: ``ulimit``'s flag and unit for each resource.
_ULIMIT_FLAGS = {
    resource.RLIMIT_CPU: ("t", 1),
    resource.RLIMIT_AS: ("v", 1024),
    resource.RLIMIT_NPROC: ("u", 1),
    resource.RLIMIT_FSIZE: ("f", 1024),
}
