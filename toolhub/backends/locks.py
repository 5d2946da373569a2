"""Per-path locks: read-modify-write of one file is serialized within a process.

Two concurrent ``edit_file`` calls on one file would otherwise both read the old text and the
second write would silently drop the first edit. Locks are created on demand and dropped when
nobody holds or waits for them, so the table never grows with the number of files touched.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class PathLocks:
    def __init__(self) -> None:
        self._locks: dict[Path, tuple[threading.Lock, int]] = {}
        self._guard = threading.Lock()

    @contextmanager
    def hold(self, *paths: Path) -> Iterator[None]:
        """Hold the locks of ``paths`` (taken in sorted order, so two holders of overlapping
        sets never deadlock)."""
        ordered = sorted(set(paths))
        locks = [self._acquire_ref(p) for p in ordered]
        taken: list[threading.Lock] = []
        try:
            for lock in locks:
                lock.acquire()
                taken.append(lock)
            yield
        finally:
            for lock in reversed(taken):
                lock.release()
            for path in ordered:
                self._release_ref(path)

    def _acquire_ref(self, path: Path) -> threading.Lock:
        with self._guard:
            lock, refs = self._locks.get(path, (threading.Lock(), 0))
            self._locks[path] = (lock, refs + 1)
            return lock

    def _release_ref(self, path: Path) -> None:
        with self._guard:
            lock, refs = self._locks[path]
            if refs <= 1:
                del self._locks[path]
            else:
                self._locks[path] = (lock, refs - 1)

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)
