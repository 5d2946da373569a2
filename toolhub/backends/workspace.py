"""The workspace: the one directory tree a session's file and command tools may touch.

Confinement takes two steps. First ``Workspace.resolve`` turns what the model sent into a real
path: relative paths are taken from the root, and anything that ends up outside it — through
``..``, an absolute path elsewhere, or a symlink pointing out — is refused with
``permission_denied``; a malformed path (a NUL byte, over-long) is ``invalid_arguments`` with a
short message. That check alone is a race, though: a process in the workspace can swap a
directory for a symlink between the check and the use. So the I/O methods here (``open_read``,
``write``, ``remove``, ``move``, ``entries``, ``kind``) never use the checked path by name: each
starts from a descriptor of the root and goes down with ``beneath``, following no symlink. A
link swapped in after the check is refused (``permission_denied``), never followed. The root
itself is reopened through its ``WorkspacePin`` on every use: a workspace swapped for a symlink
or another directory since the session began is refused (``workspace_moved``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from toolhub.core import ToolError

from .beneath import DIR_FLAGS, EscapeError, lstat_at, open_beneath, open_dir
from .workspace_pin import WorkspacePin

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
ECHO_CHARS = 120

EntryKind = Literal["file", "dir", "link", "other"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One directory entry, never followed: a symlink is a ``link`` with its ``target``."""

    name: str
    kind: EntryKind
    target: str | None = None


class SpecialFileError(OSError):
    """A FIFO, socket or device: opened without blocking to look at it, never read."""


class Workspace:
    """A confined directory tree. Thread-safe: its only state is the pin's identity, set once.

    The root is resolved here, once; from then on it is the directory ``pin`` recorded (at
    construction when it exists, else at its first use), wherever its path may lead later.
    """

    __slots__ = ("pin", "root")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()
        self.pin = WorkspacePin(self.root)
        with contextlib.suppress(OSError):
            self.pin.check()

    def resolve(self, path: str | os.PathLike[str] | None, *, what: str = "path") -> Path:
        """The real, absolute path for ``path``; ``permission_denied`` when it leaves the root.

        Models send paths with stray quotes, a trailing newline, or ``~``: those are cleaned up
        first. Symlinks are followed (also for the parent of a path that does not exist yet), so
        a link inside the workspace that points outside is refused as well.
        """
        text, candidate = self._candidate(path, what)
        real = _realpath(candidate, text, what)
        if not self.contains(real):
            with contextlib.suppress(OSError):
                self.pin.check()  # the root itself moved: say that, not "outside"
            raise ToolError.permission_denied(
                f"{what} `{echo(text or '.')}` is outside the workspace {self.root}",
                path=echo(text),
            )
        return real

    def resolve_entry(self, path: str | os.PathLike[str] | None, *, what: str = "path") -> Path:
        """The directory entry ``path`` names, without following a final symlink.

        Deleting or moving a symlink must act on the link, not on what it points to. The parent
        is resolved and confined like ``resolve``; the link's target must be inside the workspace
        too (``resolve`` checks it), so an escaping link is refused rather than touched.
        """
        real = self.resolve(path, what=what)
        text, candidate = self._candidate(path, what)
        if candidate.name in ("", ".", ".."):
            return real
        entry = _realpath(candidate.parent, text, what) / candidate.name
        if not self.contains(entry):
            raise ToolError.permission_denied(
                f"{what} `{echo(text)}` is outside the workspace {self.root}", path=echo(text)
            )
        return entry

    def _candidate(self, path: str | os.PathLike[str] | None, what: str) -> tuple[str, Path]:
        text = "" if path is None else os.fspath(path).strip().strip("\"'").strip()
        check_path_text(text, what)
        if text.startswith("~"):
            text = os.path.expanduser(text)
        candidate = Path(text) if text else self.root
        if not candidate.is_absolute():
            candidate = self.root / candidate
        return text, candidate

    def contains(self, path: Path) -> bool:
        """Whether ``path`` is the root or under it, by its parts alone (nothing is resolved):
        a string prefix test, since this runs for every path a call touches."""
        text, root = str(path), str(self.root)
        return text == root or text.startswith(root if root.endswith("/") else root + "/")

    def display(self, path: Path) -> str:
        """``path`` relative to the root when inside it (what the model should see)."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return str(rel) if str(rel) != "." else "."

    # -- I/O beneath the root: ``path`` is what ``resolve``/``resolve_entry`` returned -----------

    def kind(self, path: Path) -> EntryKind | None:
        """What ``path`` is, without following it; None when nothing is there."""
        try:
            with self._parent(path) as (dir_fd, name):
                found = lstat_at(dir_fd, name) if name else os.fstat(dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return None if found is None else _kind(found.st_mode)

    def open_read(self, path: Path) -> BinaryIO:
        """The regular file ``path``, open for reading.

        ``FileNotFoundError`` when it is missing, ``IsADirectoryError`` for a directory, and
        ``SpecialFileError`` for a FIFO, socket or device: it is opened ``O_NONBLOCK``, so a FIFO
        swapped in after a check cannot hang the call, and refused after ``fstat``.
        """
        with self._refusing_escapes(path), self._root() as root:
            try:
                fd = open_beneath(root, self._parts(path), os.O_RDONLY | os.O_NONBLOCK)
            except NotADirectoryError:
                raise FileNotFoundError(errno.ENOENT, "No such file", self.display(path)) from None
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            os.close(fd)
            if stat.S_ISDIR(found.st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", self.display(path))
            raise SpecialFileError(errno.ENXIO, _special(found.st_mode), self.display(path))
        return os.fdopen(fd, "rb")

    def read_bytes(self, path: Path, *, limit: int) -> bytes:
        """The whole regular file, refused (``invalid_arguments``) when over ``limit`` bytes."""
        with self.open_read(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise ToolError.invalid_arguments(
                f"{self.display(path)} is {max(size, len(data))} bytes, over this tool's "
                f"{limit}-byte limit for files it reads whole"
            )
        return data

    def write(self, path: Path, data: bytes) -> bool:
        """Write ``path`` atomically, making missing parents; True when it did not exist."""
        with self._parent(path, create=True) as (dir_fd, name):
            if not name:
                raise IsADirectoryError(errno.EISDIR, "the workspace root is a directory", ".")
            return write_at(dir_fd, name, data)

    def remove(self, path: Path) -> None:
        """Delete the file or symlink ``path`` itself (``unlinkat``: a link is never followed)."""
        with self._parent(path) as (dir_fd, name):
            if not name:
                raise IsADirectoryError(errno.EISDIR, "the workspace root is a directory", ".")
            os.unlink(name, dir_fd=dir_fd)

    def move(self, source: Path, target: Path) -> None:
        """Rename ``source`` to ``target``, making missing parents of the target.

        ``FileNotFoundError`` when the source is gone, ``FileExistsError`` when the target is
        there. Across file systems (a mount inside the workspace) a regular file is copied and
        then deleted; a directory is refused.
        """
        with self._parent(source) as (src_fd, src_name):
            if not src_name or lstat_at(src_fd, src_name) is None:
                raise FileNotFoundError(errno.ENOENT, "No such file", self.display(source))
            with self._parent(target, create=True) as (dst_fd, dst_name):
                if not dst_name or lstat_at(dst_fd, dst_name) is not None:
                    raise FileExistsError(errno.EEXIST, "File exists", self.display(target))
                try:
                    os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    _copy_across(src_fd, src_name, dst_fd, dst_name, self.display(source))

    def entries(self, path: Path, *, limit: int) -> tuple[list[Entry], bool]:
        """Up to ``limit`` entries of the directory ``path`` (unsorted), and whether there were
        more. ``FileNotFoundError``/``NotADirectoryError`` when it is not a directory."""
        out: list[Entry] = []
        with self._refusing_escapes(path), self._root() as root:
            fd = open_dir(root, self._parts(path))
        try:
            with os.scandir(fd) as scan:
                for item in scan:
                    if len(out) >= limit:
                        return out, True
                    out.append(_entry(fd, item))
        finally:
            os.close(fd)
        return out, False

    def _parts(self, path: Path) -> tuple[str, ...]:
        try:
            return path.relative_to(self.root).parts
        except ValueError:
            raise ToolError.permission_denied(
                f"{echo(str(path))} is outside the workspace {self.root}"
            ) from None

    @contextlib.contextmanager
    def _root(self) -> Iterator[int]:
        fd = self.pin.open()
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _parent(self, path: Path, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """A descriptor of ``path``'s directory and its last name (``""`` for the root)."""
        parts = self._parts(path)
        with self._refusing_escapes(path), self._root() as root:
            fd = open_dir(root, parts[:-1], create=create) if parts else os.dup(root)
        try:
            yield fd, parts[-1] if parts else ""
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _refusing_escapes(self, path: Path) -> Iterator[None]:
        try:
            yield
        except EscapeError:
            shown = echo(self.display(path))
            raise ToolError.permission_denied(
                f"{shown}: a symlink appeared on its way after the path was checked (the "
                "workspace changed during the call); refused, not followed",
                path=shown,
            ) from None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise ToolError.invalid_arguments(f"path `{echo(str(path))}` is too long") from None
            raise


def check_path_text(text: str, what: str = "path") -> None:
    """Refuse, as ``invalid_arguments``, text that cannot name a file: a NUL byte, a path over
    ``MAX_PATH_BYTES``, a name over ``MAX_NAME_BYTES``, or text that is not encodable."""
    if "\0" in text:
        raise ToolError.invalid_arguments(f"{what} `{echo(text)}` contains a NUL byte")
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:
        raise ToolError.invalid_arguments(f"{what} `{echo(text)}` is not valid Unicode") from None
    if len(raw) > MAX_PATH_BYTES:
        raise ToolError.invalid_arguments(
            f"{what} is {len(raw)} bytes long, over the {MAX_PATH_BYTES}-byte limit: `{echo(text)}`"
        )
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise ToolError.invalid_arguments(
            f"{what} `{echo(text)}` has a name of {len(longest)} bytes, over the "
            f"{MAX_NAME_BYTES}-byte limit"
        )


def _realpath(candidate: Path, text: str, what: str) -> Path:
    try:
        return Path(os.path.realpath(candidate))
    except OSError:  # a link on the way turned into something else while it was being read
        raise ToolError.permission_denied(
            f"{what} `{echo(text)}` changed while it was being resolved; refused",
            path=echo(text),
        ) from None


def echo(text: str) -> str:
    """``text`` as an error message may quote it: short, with NUL bytes made visible."""
    shown = text if len(text) <= ECHO_CHARS else f"{text[:ECHO_CHARS]}… ({len(text)} chars)"
    return shown.replace("\0", "\\0")


def write_at(dir_fd: int, name: str, data: bytes | BinaryIO, mode: int | None = None) -> bool:
    """Write ``name`` in ``dir_fd`` all-or-nothing: temp file, fsync, rename, in that directory.

    The temp file is made ``O_EXCL | O_NOFOLLOW`` in the same directory descriptor and renamed
    with ``renameat`` on it, so neither can land anywhere else; on any failure it is removed. A
    crash or a full disk leaves the old file or the new one, never half of it. The old file's
    mode is kept (or ``mode`` is set). True when nothing was there before.
    """
    old = lstat_at(dir_fd, name)
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", name)
    if mode is None and old is not None and stat.S_ISREG(old.st_mode):
        mode = stat.S_IMODE(old.st_mode)
    tmp = f".{name[:48]}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                shutil.copyfileobj(data, handle)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)
    return old is None


def atomic_write(path: Path, data: bytes) -> None:
    """``write_at`` by path, making parents: for trusted directories outside any workspace
    (the session's state); workspace files go through ``Workspace.write``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, DIR_FLAGS)
    try:
        write_at(fd, path.name, data)
    finally:
        os.close(fd)


def _copy_across(src_fd: int, src: str, dst_fd: int, dst: str, shown: str) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_fd)
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise ToolError.invalid_arguments(
                f"{shown} is not a regular file; only files can be moved to another file system"
            )
        write_at(dst_fd, dst, handle, stat.S_IMODE(found.st_mode))
    os.unlink(src, dir_fd=src_fd)


def _entry(dir_fd: int, item: os.DirEntry[str]) -> Entry:
    try:
        if item.is_symlink():
            try:
                target = os.readlink(item.name, dir_fd=dir_fd)
            except OSError:
                target = "?"
            return Entry(item.name, "link", target)
        if item.is_dir(follow_symlinks=False):
            return Entry(item.name, "dir")
        return Entry(item.name, "file" if item.is_file(follow_symlinks=False) else "other")
    except OSError:
        return Entry(item.name, "other")


def _kind(mode: int) -> EntryKind:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"
