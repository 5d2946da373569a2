"""Which cgroup each command runs in: one per command, inside one per session.

The threat: one session's commands taking a host's memory, pids or CPU from every other
session and from toolhub's own processes. Each command gets its own cgroup (memory, pids, CPU
weight: its limits, clamped to the operator's per-command ceilings), a child of its session's
cgroup (the session's ceilings, over all its commands on this host together). The kernel then
OOM-kills inside the command's (or the session's) cgroup, never outside it; a fork bomb stops
at ``pids.max``; a busy session gets its CPU weight, not the host.

Names, in every hierarchy (``cgroup_fs``):

* ``toolhub-session-<hash>``: a session's cgroup, shared by every toolhub process of the host
  that runs its commands; removed once it holds no command (by whoever removes its last one,
  or by the sweep).
* ``toolhub-<pid>-<start>-<n>``, inside a session's cgroup (or at the top for a runner with no
  session): one command, named by the process that started it (pid and start time name one
  process for its whole life), so the sweep can tell a dead creator's leftovers and kill them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .cgroup_fs import CgroupFs, CgroupUsage

SESSION_PREFIX = "toolhub-session-"
_MAKE_TRIES = 3


@dataclass(frozen=True, slots=True)
class SessionQuota:
    """One session's kernel bounds, from its tenant's ``Quotas``: its commands together, and
    the ceilings no single command's limits may pass. None: unbounded."""

    session_id: str
    memory_bytes: int | None = None
    pids: int | None = None
    cpu_weight: int | None = None
    memory_per_command: int | None = None
    pids_per_command: int | None = None


@dataclass(frozen=True, slots=True)
class CommandCgroup:
    """A command's cgroup: its name (relative to every hierarchy's base) and the limits it
    was given."""

    rel: str
    memory_bytes: int | None
    pids: int | None

    @property
    def session_rel(self) -> str | None:
        head, _, _ = self.rel.rpartition("/")
        return head or None


class CommandCgroups:
    """Makes, fills, reads and removes the command and session cgroups of this process."""

    _counter = itertools.count()

    def __init__(self, fs: CgroupFs) -> None:
        self.fs = fs

    @classmethod
    def detect(cls) -> CommandCgroups:
        return cls(CgroupFs.detect())

    @property
    def available(self) -> bool:
        return bool(self.fs.hierarchies)

    @property
    def controllers(self) -> frozenset[str]:
        return self.fs.controllers

    def create(
        self,
        *,
        memory_bytes: int | None,
        pids: int | None,
        session: SessionQuota | None = None,
    ) -> CommandCgroup | None:
        """A fresh cgroup for one command with ``memory_bytes`` and ``pids`` (the caller
        clamps them to the session's per-command ceilings), in its session's cgroup (made, or
        its limits set again, now); None when the host gives none or it cannot be made."""
        if not self.available:
            return None
        name = f"{_owner_tag(os.getpid())}-{next(self._counter)}"
        for _ in range(_MAKE_TRIES):
            try:
                if session is None:
                    self.fs.make(name, memory_bytes=memory_bytes, pids=pids, cpu_weight=None)
                    return CommandCgroup(name, memory_bytes, pids)
                parent = session_name(session.session_id)
                self.fs.make(
                    parent,
                    memory_bytes=session.memory_bytes,
                    pids=session.pids,
                    cpu_weight=session.cpu_weight,
                    parent=True,
                    exist_ok=True,
                )
                rel = f"{parent}/{name}"
                self.fs.make(rel, memory_bytes=memory_bytes, pids=pids, cpu_weight=None)
                return CommandCgroup(rel, memory_bytes, pids)
            except FileNotFoundError:
                continue  # the session's cgroup was removed meanwhile (its last command ended)
            except OSError:
                return None
        return None

    def join_prelude(self, cgroup: CommandCgroup) -> str:
        """Shell that moves the shell itself (and so everything it starts) into the cgroup."""
        joins = [f"echo $$ > {_quote(path / 'cgroup.procs')}" for path in self.fs.paths(cgroup.rel)]
        return "{ " + "; ".join(joins) + "; } 2>/dev/null"

    def procs_files(self, cgroup: CommandCgroup) -> list[Path]:
        return [path / "cgroup.procs" for path in self.fs.paths(cgroup.rel)]

    def join(self, cgroup: CommandCgroup, pid: int) -> None:
        """Move process ``pid`` (not yet running its command) into the cgroup; best effort,
        as ``join_prelude``."""
        self.fs.join(cgroup.rel, pid)

    def usage(self, cgroup: CommandCgroup) -> CgroupUsage:
        return self.fs.usage(cgroup.rel)

    def signal_all(self, cgroup: CommandCgroup | str, sig: signal.Signals) -> int:
        """Send ``sig`` to every process in the cgroup; returns how many were signalled."""
        count = 0
        rel = cgroup if isinstance(cgroup, str) else cgroup.rel
        for pid in self.fs.members(rel):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                count += 1
        return count

    def remove(self, cgroup: CommandCgroup | str, timeout_s: float = 5.0) -> bool:
        """Kill what is left in the cgroup and remove it (and its session's, once that holds
        no other command); False if it is still busy after ``timeout_s`` (killed processes
        take a moment to leave)."""
        rel = cgroup if isinstance(cgroup, str) else cgroup.rel
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.fs.members(rel) and self.fs.rmdir(rel):
                parent = rel.rpartition("/")[0]
                if parent:
                    self.fs.rmdir(parent)  # refused (busy) while it holds another command
                return True
            if time.monotonic() > deadline:
                return False
            self.signal_all(rel, signal.SIGKILL)
            time.sleep(0.01)

    def remove_later(self, cgroup: CommandCgroup) -> None:
        """``remove`` on a daemon thread, so nobody waits for stragglers to be reaped."""
        threading.Thread(target=self.remove, args=(cgroup,), name="cgroup-rm", daemon=True).start()

    def reap_stale(self) -> int:
        """Kill and remove the command cgroups whose creating process is gone (a worker or
        holder that died with commands running): no process of a lost attempt outlives it.
        Session cgroups left empty go too. Returns how many cgroups still had processes."""
        if not self.available:
            return 0
        reaped = 0
        # A worker's hundreds of commands share one owner: its liveness is read once a sweep.
        alive: dict[str, bool] = {}
        for name in sorted(self.fs.children()):
            if name.startswith(SESSION_PREFIX):
                for child in sorted(self.fs.children(name)):
                    reaped += self._reap(f"{name}/{child}", child, alive)
                self.fs.rmdir(name)  # refused (busy) while it holds a command
            elif name.startswith("toolhub-"):
                reaped += self._reap(name, name, alive)
        return reaped

    def _reap(self, rel: str, name: str, alive: dict[str, bool]) -> int:
        owner = _owner_key(name)
        if owner is None:
            return 0  # not ours to judge
        if owner not in alive:
            alive[owner] = _owner_alive(name)
        if alive[owner]:
            return 0
        busy = 1 if self.fs.members(rel) else 0
        self.remove(rel, timeout_s=1.0)
        return busy


def session_name(session_id: str) -> str:
    """The cgroup name of a session: a hash, so any session id makes a valid, fixed-length
    directory name."""
    return SESSION_PREFIX + hashlib.sha256(session_id.encode()).hexdigest()[:20]


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


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
