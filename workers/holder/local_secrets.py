"""Host-local secrets of the workers of one ``$TOOLHUB_HOME``: random values in 0600 files.

Threat: a command of a session runs as the worker's uid. A secret on a command line
(``/proc/<pid>/cmdline``) or in an environment it inherits is readable by it; a file in a 0700
directory under ``$TOOLHUB_HOME`` is not, since every confined sandbox hides that home (bwrap
does not mount it, Landlock does not grant it). Two live here: the holder's capability (only a
worker, never a command, can ask the holder for anything: ``server.py``) and the key that names
session directories without their session id (``session_records.py``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def local_secret(path: Path) -> str:
    """The secret in ``path``, made now (32 random bytes, hex, mode 0600, its directory 0700)
    when there is none; two processes making it at once end up with the same one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        os.chmod(path.parent, 0o700)
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    fresh = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode())
        os.fsync(fd)
    except OSError:  # a full disk: no half-made secret stays behind
        os.unlink(fresh)
        raise
    finally:
        os.close(fd)
    try:
        os.link(fresh, path)  # fails when another process made it first: theirs wins
    except FileExistsError:
        pass
    finally:
        os.unlink(fresh)
    return _read(path)


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        value = os.read(fd, 256).decode().strip()
    finally:
        os.close(fd)
    if len(value) < 32:
        raise OSError(f"{path} holds no secret")
    return value
