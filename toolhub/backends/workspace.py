"""The workspace: the one directory tree a session's file and command tools may touch.

Every path a model sends goes through ``Workspace.resolve``: relative paths are taken from the
workspace root, and anything that ends up outside it — through ``..``, an absolute path elsewhere,
or a symlink pointing out — is refused with ``permission_denied`` before any I/O happens.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from toolhub.core import ToolError


class Workspace:
    """A confined directory tree. Thread-safe: it holds no mutable state."""

    __slots__ = ("root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()

    def resolve(self, path: str | os.PathLike[str] | None, *, what: str = "path") -> Path:
        """The real, absolute path for ``path``; ``permission_denied`` when it leaves the root.

        Models send paths with stray quotes, a trailing newline, or ``~``: those are cleaned up
        first. Symlinks are followed (also for the parent of a path that does not exist yet), so
        a link inside the workspace that points outside is refused as well.
        """
        text, candidate = self._candidate(path)
        real = Path(os.path.realpath(candidate))
        if not self.contains(real):
            raise ToolError.permission_denied(
                f"{what} `{text or '.'}` is outside the workspace {self.root}",
                path=text,
            )
        return real

    def resolve_entry(self, path: str | os.PathLike[str] | None, *, what: str = "path") -> Path:
        """The directory entry ``path`` names, without following a final symlink.

        Deleting or moving a symlink must act on the link, not on what it points to. The parent
        is resolved and confined like ``resolve``; the link's target must be inside the workspace
        too (``resolve`` checks it), so an escaping link is refused rather than touched.
        """
        real = self.resolve(path, what=what)
        _, candidate = self._candidate(path)
        if candidate.name in ("", ".", ".."):
            return real
        entry = Path(os.path.realpath(candidate.parent)) / candidate.name
        if not self.contains(entry):
            raise ToolError.permission_denied(
                f"{what} `{path}` is outside the workspace {self.root}", path=str(path)
            )
        return entry

    def _candidate(self, path: str | os.PathLike[str] | None) -> tuple[str, Path]:
        text = "" if path is None else os.fspath(path).strip().strip("\"'").strip()
        if text.startswith("~"):
            text = os.path.expanduser(text)
        candidate = Path(text) if text else self.root
        if not candidate.is_absolute():
            candidate = self.root / candidate
        return text, candidate

    def contains(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def display(self, path: Path) -> str:
        """``path`` relative to the root when inside it (what the model should see)."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return str(rel) if str(rel) != "." else "."


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all-or-nothing: temp file in the same directory, fsync, rename.

    A crash or a full disk leaves either the old file or the new one, never half of it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
