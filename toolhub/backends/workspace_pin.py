"""The workspace pinned: the same directory on every use, never whatever its path names now.

Threat: a session's workspace is a path, checked when the session was made. Whoever can write
its parent (another session whose workspace holds this one) can later swap the directory for a
symlink to ``/etc`` or ``$TOOLHUB_HOME``, or for another directory, and every later command
(bwrap binds the path, Landlock grants it) and file tool (which starts from a descriptor of the
root) would work there, read-write. So a ``WorkspacePin`` records the directory's identity
(``st_dev``, ``st_ino``) when it is first opened and reopens it on every use with no symlink
followed anywhere on its path (``openat2(RESOLVE_NO_SYMLINKS)`` from ``/``, or an
``O_NOFOLLOW`` walk): a path that now holds a symlink, or a directory that is not the one
recorded, is refused with ``workspace_moved`` (logged at WARNING) and nothing runs. The
descriptor it returns is what the caller binds (bwrap's ``--bind-fd``) or compares (Landlock's
wrapper checks the identity of the directory it grants), so a swap after the check changes
nothing either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from toolhub.core import ToolError
from toolhub.errors import ErrorCode

from .beneath import DIR_FLAGS, EscapeError, open_dir

logger = logging.getLogger("toolhub.sandbox")

Identity = tuple[int, int]


def workspace_moved(path: str, why: str) -> ToolError:
    """The typed refusal (one line: what and why), logged at WARNING."""
    logger.warning("refused: workspace %s %s; nothing ran", path, why)
    return ToolError.custom(
        ErrorCode.WORKSPACE_MOVED,
        f"refused: the session's workspace {path} {why}; nothing ran in it",
        path=path,
    )


class WorkspacePin:
    """One workspace directory by its absolute path and identity. Thread-safe."""

    __slots__ = ("_identity", "_lock", "path")

    def __init__(self, path: str | os.PathLike[str], identity: Identity | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self._identity = identity
        self._lock = threading.Lock()

    @property
    def identity(self) -> Identity | None:
        """(st_dev, st_ino) recorded at the first open (or given): None before."""
        return self._identity

    def open(self) -> int:
        """A descriptor of the workspace (``O_DIRECTORY``, close-on-exec), after checking no
        component of its path is a symlink and it is the directory recorded; the first open
        records it. ``workspace_moved`` otherwise; ``FileNotFoundError`` when it is gone."""
        parts = [p for p in self.path.split("/") if p]
        top = os.open("/", DIR_FLAGS)
        try:
            fd = open_dir(top, parts)
        except EscapeError:
            raise workspace_moved(self.path, "now has a symlink on its path") from None
        except NotADirectoryError:
            raise workspace_moved(self.path, "is no longer a directory") from None
        finally:
            os.close(top)
        found = os.fstat(fd)
        seen = (found.st_dev, found.st_ino)
        with self._lock:
            if self._identity is None:
                self._identity = seen
        if seen != self._identity:
            os.close(fd)
            raise workspace_moved(self.path, "was replaced by another directory")
        return fd

    def check(self) -> Identity:
        """``open`` and close: the identity when the workspace is still itself."""
        os.close(self.open())
        assert self._identity is not None
        return self._identity

    @contextlib.contextmanager
    def opened(self) -> Iterator[int]:
        fd = self.open()
        try:
            yield fd
        finally:
            os.close(fd)


def require_real(path: str | os.PathLike[str]) -> Path:
    """``path`` when it names a directory with no symlink on its way (what a session record
    holds: the gateway resolved it at creation); ``workspace_moved`` when it no longer does.
    For a process that builds a session from its record, before anything pins it."""
    text = os.fspath(path)
    if os.path.realpath(text) != os.path.abspath(text):
        raise workspace_moved(text, "now has a symlink on its path")
    return Path(text)
