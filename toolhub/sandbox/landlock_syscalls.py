"""The three Landlock system calls, for ``landlock.py`` and the exec wrapper.

Standard library only, and no package-relative imports: the exec wrapper
(``landlock_exec.py``) loads this file by itself, without importing ``toolhub``, once per
command. The PyPI binding (``landlock`` 1.0.0.dev5, alpha) covers ABI 1 filesystem rules only,
without network rules or scopes, so the calls are made here with ``ctypes``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
from collections.abc import Iterable, Mapping

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 16, 32, 64, 128
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 256, 512, 1024, 2048, 4096
REFER, TRUNCATE, IOCTL_DEV = 8192, 16384, 32768
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.syscall(number, *args))
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


@functools.cache
def abi_version() -> int:
    """The kernel's Landlock ABI (0: none, or disabled at boot)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def fs_rights(abi: int) -> int:
    """Every filesystem right this ABI handles (what an unlisted path is denied)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def drop_capabilities() -> None:
    """Drop every capability from every set, bounding set first (it needs ``CAP_SETPCAP``), so
    none comes back on ``execve`` even for uid 0. A root caller keeps ``CAP_SYS_PTRACE``
    otherwise, and Landlock lets a tracer with it read other processes' ``/proc/<pid>/environ``
    (bwrap's ``--cap-drop ALL`` is the same step)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break  # EINVAL: past the last capability this kernel knows
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header, data = Header(_LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def restrict_self(
    rules: Iterable[tuple[str, int]],
    *,
    network: bool,
    connect_port: int | None = None,
    pinned: Mapping[str, tuple[int, int]] | None = None,
) -> int:
    """Confine this process (and all it starts) to ``rules``; returns the ABI used. With
    network off, ``connect_port`` stays connectable (TCP). A path in ``pinned`` is granted only
    when the directory opened is the one of that (``st_dev``, ``st_ino``): a workspace swapped
    since it was checked is refused, not granted. Raises ``OSError`` when the kernel refuses
    (a port rule needs ABI 4) or a pinned path is not itself."""
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    handled = fs_rights(abi)

    class RulesetAttr(ctypes.Structure):
        _fields_ = [
            ("handled_access_fs", ctypes.c_uint64),
            ("handled_access_net", ctypes.c_uint64),
            ("scoped", ctypes.c_uint64),
        ]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not network else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = RulesetAttr(handled, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                if path in (pinned or {}):
                    raise
                continue  # gone since the grants were computed: nothing to allow
            try:
                expected = (pinned or {}).get(path)
                if expected is not None:
                    found = os.fstat(fd)
                    if (found.st_dev, found.st_ino) != tuple(expected):
                        raise OSError(
                            errno.ESTALE, f"the workspace {path} is not the directory checked"
                        )
                allowed = rights & handled
                if not os.path.isdir(path):
                    allowed &= _FILE_ONLY
                rule = PathBeneath(allowed, fd)
                _syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(fd)
        if connect_port is not None and not network:
            if not net:
                raise OSError("a network allowlist under Landlock needs ABI 4 (TCP rules)")

            class NetPort(ctypes.Structure):
                _pack_ = 1
                _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]

            port_rule = NetPort(NET_CONNECT_TCP, connect_port)
            _syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(port_rule), 0)
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _syscall(_SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return abi
