"""Opening paths strictly beneath a directory descriptor, following no symlink on the way.

Checking a path and then using it by name is a race (TOCTOU): between ``realpath`` and
``open``, a process in the workspace can replace a directory on the way with a symlink to
``../outside``, and the open lands outside. So the file tools never use a path by name. Every
operation starts from a descriptor of the workspace root and resolves the rest relative to it,
refusing any symlink it meets:

* where the kernel has ``openat2`` (Linux 5.6+), one call with ``RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS``: the kernel itself refuses ``..`` above the root, absolute paths,
  symlinks and ``/proc`` magic links, atomically;
* elsewhere (``ENOSYS``, a seccomp profile answering ``EPERM``, another OS, an architecture we
  do not know the call number of), a walk of one ``openat(O_NOFOLLOW | O_DIRECTORY)`` per
  component, each from the descriptor of the one before.

Callers pass paths that ``Workspace.resolve`` has already resolved (symlinks inside the
workspace replaced by their targets), so a symlink met here is one that appeared after the
check, and refusing it is always right. The last component is then used with ``*at`` calls on
its parent's descriptor (``unlinkat``, ``renameat``, ``mkdirat``, ``fstatat`` without following),
which never follow a link there either. Both ways raise ``EscapeError`` for a symlink or ``..``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat
import sys
from collections.abc import Callable, Sequence

RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

OpenAt2 = Callable[[int, str, int, int], int]


class EscapeError(PermissionError):
    """A component of a path is a symlink (or ``..``): following it could leave the root."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.ELOOP, "a symlink or `..` on the way, refused", path)


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


def _load_openat2() -> OpenAt2 | None:
    """The ``openat2`` system call, or None when this process cannot use it."""
    number = _SYS_OPENAT2.get(platform.machine())
    if number is None or not sys.platform.startswith("linux"):
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    syscall.argtypes = [
        ctypes.c_long,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]

    def call(dir_fd: int, path: str, flags: int, mode: int) -> int:
        how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, _RESOLVE)
        fd = int(syscall(number, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how)))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return fd

    root = os.open("/", DIR_FLAGS)
    try:  # ENOSYS (old kernel) or EPERM (a seccomp profile that predates it): use the walk
        os.close(call(root, ".", DIR_FLAGS, 0))
    except OSError:
        return None
    finally:
        os.close(root)
    return call


openat2: OpenAt2 | None = _load_openat2()
"""The system call when usable; tests set it to None to exercise the walk."""


def open_dir(root_fd: int, parts: Sequence[str], *, create: bool = False) -> int:
    """A descriptor of the directory ``parts`` beneath ``root_fd`` (``()`` is the root itself).

    ``create`` makes missing directories on the way (``mkdirat`` from the parent's descriptor,
    so a directory made here is always the one then opened).
    """
    path = "/".join(parts) or "."
    if openat2 is not None:
        try:
            return _openat2(root_fd, path, DIR_FLAGS, 0)
        except FileNotFoundError:
            if not create:
                raise
    fd = os.open(".", DIR_FLAGS, dir_fd=root_fd)
    try:
        for part in parts:
            try:
                child = _step(fd, part, path)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: links still refused
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = _step(fd, part, path)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_beneath(root_fd: int, parts: Sequence[str], flags: int, mode: int = 0o666) -> int:
    """Open ``parts`` beneath ``root_fd`` with ``flags`` (``O_NOFOLLOW | O_CLOEXEC`` added)."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the workspace root is a directory", ".")
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    path = "/".join(parts)
    if openat2 is not None:
        return _openat2(root_fd, path, flags, mode)
    parent = open_dir(root_fd, parts[:-1])
    try:
        return os.open(_name(parts[-1], path), flags, mode, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EscapeError(path) from None
        raise
    finally:
        os.close(parent)


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """``name`` in ``dir_fd`` without following it; None when there is nothing there."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _openat2(root_fd: int, path: str, flags: int, mode: int) -> int:
    assert openat2 is not None
    try:
        return openat2(root_fd, path, flags, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            raise EscapeError(path) from None
        raise


def _step(fd: int, part: str, path: str) -> int:
    """Open the directory ``part`` in ``fd``; a symlink there is an escape, not a directory."""
    try:
        return os.open(_name(part, path), DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
    except NotADirectoryError:
        found = lstat_at(fd, part)
        if found is not None and (stat.S_ISLNK(found.st_mode) or stat.S_ISDIR(found.st_mode)):
            raise EscapeError(path) from None  # a link, or a directory again: it was swapped
        raise


def _name(part: str, path: str) -> str:
    if part == ".." or "/" in part or not part:
        raise EscapeError(path)
    return part
