"""The cgroup filesystem, v1 or v2: where this process may make child cgroups, and the files
that set and read their memory, pids and CPU.

The threat it serves: a command that takes all of a host's memory or pids makes the kernel kill
(or starve) whatever it picks, toolhub's own processes included. A cgroup holds a command to
its own share: the kernel OOM-kills inside it, forks past ``pids.max`` fail, and CPU is shared
by weight. This module only knows the kernel's two layouts; ``cgroups.py`` decides which
cgroups a command gets and what goes in them.

* cgroup v1: one mount per controller (or a few co-mounted), found in ``/proc/self/mounts``;
  this process's place in each is its line of ``/proc/self/cgroup``. A child cgroup is a
  directory of the same relative name in every hierarchy we can write.
* cgroup v2: one tree; children of this process's cgroup get the controllers its
  ``cgroup.subtree_control`` delegates, and a parent we make passes them on to its children.

On a hybrid host (v1 controllers beside an empty v2 tree) the v1 controllers are used.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: The controllers toolhub uses: memory and pids bound a command, cpu weighs it, cpuacct
#: (v1) counts its CPU time (v2 counts it in ``cpu.stat`` without any controller).
CONTROLLERS = frozenset({"memory", "pids", "cpu", "cpuacct"})
_V2_DELEGATED = ("memory", "pids", "cpu")


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """A directory under which this process may make child cgroups, and the controllers a
    child there gets."""

    base: Path
    controllers: frozenset[str]
    unified: bool


@dataclass(frozen=True, slots=True)
class CgroupUsage:
    """What a cgroup used: CPU seconds and peak memory (None where the kernel does not count
    them), and how many of its processes the OOM killer took."""

    cpu_seconds: float | None
    peak_memory_bytes: int | None
    oom_kills: int


class CgroupFs:
    """The writable hierarchies of this host, as detected for this process."""

    def __init__(self, hierarchies: Iterable[Hierarchy]) -> None:
        self.hierarchies = tuple(hierarchies)

    @classmethod
    def detect(cls) -> CgroupFs:
        return cls(detect_hierarchies())

    @property
    def controllers(self) -> frozenset[str]:
        return frozenset().union(*(h.controllers for h in self.hierarchies))

    @property
    def version(self) -> int | None:
        """2 on a unified tree, 1 on v1 controllers, None without any writable one."""
        if not self.hierarchies:
            return None
        return 2 if self.hierarchies[0].unified else 1

    def paths(self, rel: str) -> list[Path]:
        """The directories of cgroup ``rel`` (relative to the bases), one per hierarchy."""
        return [h.base / rel for h in self.hierarchies]

    def make(
        self,
        rel: str,
        *,
        memory_bytes: int | None,
        pids: int | None,
        cpu_weight: int | None,
        parent: bool = False,
        exist_ok: bool = False,
    ) -> None:
        """Make cgroup ``rel`` in every hierarchy and set its limits (None: left unlimited).
        ``parent``: its children get its controllers (v2). ``exist_ok``: an existing one has
        its limits set again, best effort (a lower memory limit than its use is refused).
        Raises ``OSError`` (with what was made removed again) when a directory or a limit
        cannot be made."""
        made: list[Path] = []
        try:
            for h in self.hierarchies:
                path = h.base / rel
                try:
                    path.mkdir()
                    made.append(path)
                except FileExistsError:
                    if not exist_ok:
                        raise
                    with contextlib.suppress(OSError):
                        _set_limits(path, h, memory_bytes, pids, cpu_weight)
                    continue
                _set_limits(path, h, memory_bytes, pids, cpu_weight)
                if parent and h.unified:
                    wanted = " ".join(f"+{c}" for c in _V2_DELEGATED if c in h.controllers)
                    (path / "cgroup.subtree_control").write_text(wanted)
        except OSError:
            for path in reversed(made):
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise

    def children(self, rel: str = "") -> set[str]:
        """The names of the child cgroups of ``rel``, in any hierarchy."""
        names: set[str] = set()
        for h in self.hierarchies:
            with contextlib.suppress(OSError), os.scandir(h.base / rel) as entries:
                names.update(e.name for e in entries if e.is_dir(follow_symlinks=False))
        return names

    def members(self, rel: str) -> list[int]:
        """The pids in cgroup ``rel``, in any hierarchy (one process may have left one)."""
        pids: set[int] = set()
        for path in self.paths(rel):
            pids.update(members(path))
        return sorted(pids)

    def rmdir(self, rel: str) -> bool:
        """Remove cgroup ``rel`` everywhere it is empty; True when it is gone from all."""
        gone = True
        for path in self.paths(rel):
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        return gone

    def join(self, rel: str, pid: int) -> None:
        """Move process ``pid`` into ``rel`` in every hierarchy; best effort (a process that
        ended meanwhile is not an error)."""
        for path in self.paths(rel):
            with contextlib.suppress(OSError):
                (path / "cgroup.procs").write_text(str(pid))

    def usage(self, rel: str) -> CgroupUsage:
        cpu: float | None = None
        peak: int | None = None
        kills = 0
        for h in self.hierarchies:
            path = h.base / rel
            if h.unified:
                cpu = _stat_field(path / "cpu.stat", "usage_usec", 1e-6, cpu)
                peak = _read_int(path / "memory.peak", peak)
                kills += int(_stat_field(path / "memory.events", "oom_kill", 1, 0.0) or 0)
                continue
            if "cpuacct" in h.controllers:
                usage_ns = _read_int(path / "cpuacct.usage", None)
                cpu = cpu if usage_ns is None else usage_ns / 1e9
            if "memory" in h.controllers:
                peak = _read_int(path / "memory.max_usage_in_bytes", peak)
                kills += int(_stat_field(path / "memory.oom_control", "oom_kill", 1, 0.0) or 0)
        return CgroupUsage(cpu, peak, kills)


def _set_limits(
    path: Path, h: Hierarchy, memory_bytes: int | None, pids: int | None, cpu_weight: int | None
) -> None:
    """Write the limits ``h``'s controllers hold. Swap is turned off for a memory limit where
    the kernel counts it (``memsw``, ``memory.swap.max``): a command past its limit is then
    OOM-killed instead of swapping the host to a crawl."""
    if memory_bytes is not None and "memory" in h.controllers:
        if h.unified:
            (path / "memory.max").write_text(str(memory_bytes))
            _optional(path / "memory.swap.max", "0")
            _optional(path / "memory.oom.group", "1")
        else:
            (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
            _optional(path / "memory.memsw.limit_in_bytes", str(memory_bytes))
    if pids is not None and "pids" in h.controllers:
        (path / "pids.max").write_text(str(pids))
    if cpu_weight is not None and "cpu" in h.controllers:
        if h.unified:
            _optional(path / "cpu.weight", str(cpu_weight))
        else:  # shares: 1024 is v1's default, as weight 100 is v2's
            _optional(path / "cpu.shares", str(max(2, cpu_weight * 1024 // 100)))


def _optional(path: Path, value: str) -> None:
    """Write a knob some kernels lack (no swap accounting, an older v2)."""
    with contextlib.suppress(OSError):
        path.write_text(value)


def members(path: Path) -> list[int]:
    """The pids in the cgroup directory ``path`` (none when it is gone)."""
    try:
        text = (path / "cgroup.procs").read_text()
    except OSError:
        return []
    return [int(line) for line in text.split() if line.isdigit()]


def _read_int(path: Path, default: int | None) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _stat_field(path: Path, key: str, scale: float, default: float | None) -> float | None:
    """Field ``key`` of a ``key value`` per line file, times ``scale``."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value) * scale
    except (OSError, ValueError):
        pass
    return default


def detect_hierarchies() -> tuple[Hierarchy, ...]:
    """The writable places for child cgroups: v1 controllers where the host mounts any of
    ``memory`` or ``pids``, else this process's v2 cgroup when it delegates controllers."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return ()
    v1_mounts: dict[str, Path] = {}
    v2_mount: Path | None = None
    for line in mounts:
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup":
            for option in fields[3].split(","):
                if option in CONTROLLERS:
                    v1_mounts.setdefault(option, Path(fields[1]))
        elif fields[2] == "cgroup2" and v2_mount is None:
            v2_mount = Path(fields[1])
    found: list[Hierarchy] = []
    taken: set[str] = set()
    for line in own:
        _, names, rel = line.split(":", 2)
        controllers = frozenset(names.split(",")) & CONTROLLERS
        if not controllers or controllers & taken:
            continue
        mount = v1_mounts.get(next(iter(controllers)))
        if mount is None:
            continue
        base = mount / rel.lstrip("/")
        if _writable(base):
            found.append(Hierarchy(base, controllers, unified=False))
            taken |= controllers
    if taken & {"memory", "pids"}:
        return tuple(found)
    if v2_mount is None:
        return ()
    for line in own:
        _, names, rel = line.split(":", 2)
        if names != "":
            continue
        base = v2_mount / rel.lstrip("/")
        try:
            delegated = frozenset((base / "cgroup.subtree_control").read_text().split())
        except OSError:
            return ()
        controllers = delegated & frozenset(_V2_DELEGATED)
        if controllers & {"memory", "pids"} and _writable(base):
            return (Hierarchy(base, controllers, unified=True),)
    return ()


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK) and (path / "cgroup.procs").exists()
