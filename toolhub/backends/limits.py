"""Resource limits for commands: what one shell command may consume before the kernel stops it.

Limits are applied by a short shell prelude (``ulimit``) that runs in the child *before* the
user's command, rather than by a Python ``preexec_fn``: ``preexec_fn`` runs interpreter code
between ``fork`` and ``exec``, which can deadlock in a process with threads (a worker always has
them). The prelude is plain shell, so nothing of ours runs in the child.

``RLIMIT_NPROC`` does not bind root, and a fork bomb run by root would exhaust the machine's pid
table. Where a pids cgroup can be created (cgroup v1 ``pids`` or v2 with the ``pids`` controller
delegated), each command also gets its own cgroup with ``pids.max``: that holds for every user,
and it lets a kill reach processes that left the command's process group.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import resource
import shlex
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """Per-command limits; ``None`` leaves a limit as the worker has it.

    ``max_processes`` counts processes (threads, under a cgroup) of the command itself when a
    pids cgroup is available, and of the whole user otherwise (``RLIMIT_NPROC`` semantics).
    """

    cpu_seconds: int | None = None
    address_space_bytes: int | None = 8 * _GIB
    max_processes: int | None = 4096
    file_size_bytes: int | None = None

    def rlimits(self) -> list[tuple[int, int, int]]:
        """``(resource, soft, hard)`` for each limit set, clamped to what this process's own
        hard limits allow (lowering a limit always succeeds; raising one past them would not).
        CPU: soft below hard, so SIGXCPU (nameable, catchable) comes before SIGKILL."""
        out: list[tuple[int, int, int]] = []
        for rlimit, value in (
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_AS, self.address_space_bytes),
            (resource.RLIMIT_NPROC, self.max_processes),
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

    def ulimit_prelude(self) -> str:
        """Shell commands that set ``rlimits`` (hard and soft), so ``ulimit`` never fails and
        never prints an error."""
        parts: list[str] = []
        for rlimit, soft, hard in self.rlimits():
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


class PidsCgroups:
    """Creates one pids-limited cgroup per command, when the host lets us."""

    _counter = itertools.count()

    def __init__(self, base: Path | None) -> None:
        self.base = base

    @classmethod
    def detect(cls) -> PidsCgroups:
        """The cgroup directory under which this process may create pids-limited children, or
        an instance that does nothing (``available`` False)."""
        return cls(_find_pids_base())

    @property
    def available(self) -> bool:
        return self.base is not None

    def create(self, max_pids: int) -> Path | None:
        """A fresh cgroup capped at ``max_pids`` tasks, or None when that fails."""
        if self.base is None:
            return None
        path = self.base / f"{_owner_tag(os.getpid())}-{next(self._counter)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return path

    def reap_stale(self) -> int:
        """Kill and remove the command cgroups whose creating process is gone (a worker or
        holder that died with commands running): no process of a lost attempt outlives it.
        Returns how many cgroups still had processes in them."""
        if self.base is None:
            return 0
        reaped = 0
        try:
            with os.scandir(self.base) as entries:
                names = [e.name for e in entries if e.name.startswith("toolhub-") and e.is_dir()]
        except OSError:
            return 0
        # A worker's hundreds of commands share one owner: its liveness is read once a sweep.
        alive: dict[str, bool] = {}
        for name in names:
            owner = _owner_key(name)
            if owner is None:
                continue  # not ours to judge
            if owner not in alive:
                alive[owner] = _owner_alive(name)
            if alive[owner]:
                continue
            path = self.base / name
            if _members(path):
                reaped += 1
            self.remove(path, timeout_s=1.0)
        return reaped

    @staticmethod
    def join_prelude(path: Path) -> str:
        """Shell that moves the shell itself (and so everything it starts) into ``path``."""
        return f"echo $$ > {shlex.quote(str(path / 'cgroup.procs'))} 2>/dev/null"

    @staticmethod
    def join(path: Path, pid: int) -> None:
        """Move process ``pid`` (not yet running its command) into ``path``; best effort, as
        ``join_prelude``."""
        with contextlib.suppress(OSError):
            (path / "cgroup.procs").write_text(str(pid))

    @staticmethod
    def signal_all(path: Path, sig: signal.Signals) -> int:
        """Send ``sig`` to every process in the cgroup; returns how many were signalled."""
        count = 0
        for pid in _members(path):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                count += 1
        return count

    @staticmethod
    def remove(path: Path, timeout_s: float = 5.0) -> bool:
        """Kill what is left in the cgroup and remove it; False if it is still busy after
        ``timeout_s`` (killed processes take a moment to leave)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not _members(path):
                try:
                    path.rmdir()
                    return True
                except FileNotFoundError:
                    return True
                except OSError:
                    pass
            if time.monotonic() > deadline:
                return False
            PidsCgroups.signal_all(path, signal.SIGKILL)
            time.sleep(0.01)

    def remove_later(self, path: Path) -> None:
        """``remove`` on a daemon thread, so nobody waits for stragglers to be reaped."""
        threading.Thread(target=self.remove, args=(path,), name="cgroup-rm", daemon=True).start()


def _members(path: Path) -> list[int]:
    try:
        text = (path / "cgroup.procs").read_text()
    except OSError:
        return []
    return [int(line) for line in text.split() if line.isdigit()]


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22):
    with the pid it names one process for its whole life, even after the pid is reused.
    None for a process that is gone (a zombie counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in {"Z", "X"} else fields[19]


@functools.cache
def _owner_tag(pid: int) -> str:
    """This process's part of its cgroup names (cached by pid: a forked child has its own)."""
    return f"toolhub-{pid}-{_start_time(pid) or 0}"


def _owner_key(name: str) -> str | None:
    """The part of cgroup ``name`` that names its creating process (``toolhub-<pid>-<start>``,
    or ``toolhub-<pid>`` in the older three-part names); None for a name of another shape,
    which is judged on its own (``_owner_alive`` leaves it alone)."""
    parts = name.split("-")
    if len(parts) < 3 or not parts[1].isdigit():
        return None
    return "-".join(parts[:3] if len(parts) > 3 else parts[:2])


def _owner_alive(name: str) -> bool:
    """Whether the process that created cgroup ``name`` (``toolhub-<pid>-<start>-<n>``) runs."""
    parts = name.split("-")
    if len(parts) < 3 or not parts[1].isdigit():
        return True  # not ours to judge
    started = _start_time(int(parts[1]))
    if len(parts) == 3:  # the older name, without the start time
        return started is not None
    return started == parts[2]


def _find_pids_base() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            base = Path("/sys/fs/cgroup/pids") / rel.lstrip("/")
            if _writable(base):
                return base
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if controllers == "":
            base = Path("/sys/fs/cgroup") / rel.lstrip("/")
            try:
                delegated = "pids" in (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                delegated = False
            if delegated and _writable(base):
                return base
    return None


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK) and (path / "cgroup.procs").exists()
