"""The disk one session may fill: its workspace, its private tmp and its command logs
together, at most ``limit`` bytes (the tenant's ``disk_per_session`` quota).

Threat: a model's command writing until the host's disk is full (1 GiB in ``/tmp`` lands in
``$TOOLHUB_HOME``), so that every tenant's commands, logs and state writes fail. Enforced in
three layers: before each command the session's usage is checked, and a full session gets a
typed error the model reads (``disk quota of this session is full: N of M bytes used``); each
command runs with ``RLIMIT_FSIZE`` set to what is left, so the kernel stops
(``SIGXFSZ``/``EFBIG``) any one file that would overrun it; after each command the usage is
measured again. A full session's commands still run, with no room to grow any file (so the
model can remove files and look around), and one that fails while the quota is full ends in
the typed error. A background command is refused while the quota is full. Nothing already
stored is removed.

Measuring walks the directories (``os.scandir``, no symlinks followed, each inode once,
allocated blocks so a sparse file counts what it uses), so it is done only when a command
may have written (``invalidate`` after each) and the result is cached between commands.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path

from toolhub.core import ErrorKind, ToolError

__all__ = ["DISK_QUOTA_FULL", "DiskBudget", "disk_usage"]

#: The ``code`` of the error a full session's command gets.
DISK_QUOTA_FULL = "disk_quota_full"


def disk_usage(paths: Sequence[Path]) -> int:
    """Bytes allocated under ``paths`` (directories or files), each inode counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(p) for p in paths]
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        total += st.st_blocks * 512
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as entries:
                    stack.extend(entry.path for entry in entries)
            except OSError:
                continue
    return total


class DiskBudget:
    """What ``paths`` (a session's workspace and its directory: tmp, logs, worktrees) may
    hold together; ``limit`` None: unbounded. Thread-safe."""

    def __init__(self, paths: Sequence[Path], limit: int | None) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.limit = limit
        self._used: int | None = None
        self._lock = threading.Lock()

    def used(self) -> int:
        """The bytes used, measured when something may have changed since the last time."""
        with self._lock:
            if self._used is None:
                self._used = disk_usage(self.paths)
            return self._used

    def invalidate(self) -> None:
        """A command ran (or a file was written): measure again at the next question."""
        with self._lock:
            self._used = None

    def remaining(self) -> int | None:
        """Bytes left (0 when full); None when unbounded."""
        if self.limit is None:
            return None
        return max(self.limit - self.used(), 0)

    def full(self) -> bool:
        return self.limit is not None and self.used() >= self.limit

    def check(self, what: str = "") -> None:
        """Raise the typed error when the session's disk quota is full; ``what`` (the
        output of the command that met it) is added to the text the model reads."""
        if self.limit is None or not self.full():
            return
        used = self.used()
        detail = (
            f"disk quota of this session is full: {used} of {self.limit} bytes used "
            "(workspace, tmp and logs together); remove files you no longer need with a "
            "command (rm): commands still run, but no file can grow until there is room. "
            "Nothing already stored was removed."
        )
        raise ToolError(
            ErrorKind.EXECUTION,
            detail + (f"\n{what}" if what else ""),
            {"code": DISK_QUOTA_FULL, "used": used, "limit": self.limit},
        )
