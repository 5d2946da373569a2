"""The holder's unix socket: bound with mode 0600, rebound when someone removes it, unlinked
(only while it is still ours) before the holder stops accepting, and every request on it
authenticated.

Threat: a command runs as the worker's uid, and under Landlock it can find the socket and
connect, so neither the uid nor the socket's mode tells a worker from a command. A peer of
another uid is refused (``SO_PEERCRED``), and so is any request that does not carry the
workers' capability (``local_secrets.py``), compared in constant time; both are logged.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import socket
import struct
from collections.abc import Callable
from typing import Any

from .client import HolderPaths, read_line

logger = logging.getLogger("toolhub.worker.holder")

_UCRED = struct.Struct("3i")


class HolderSocket:
    """The listening socket of one holder and the capability its requests must carry."""

    def __init__(self, paths: HolderPaths) -> None:
        self.paths = paths
        self.listener: socket.socket | None = None
        self._inode: int | None = None
        #: The workers' capability (set once the holder has read it).
        self.secret = ""

    def bind(self) -> None:
        """Listen on the socket path, created with mode 0600 (a dead holder's is replaced:
        the caller holds the life lock)."""
        path = os.fspath(self.paths.socket)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead holder's (we hold the life lock)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(64)
        self.listener, self._inode = sock, os.stat(path).st_ino

    def unbind(self) -> None:
        """Unlink the socket (only if it is still ours), then stop accepting: a worker that
        connects from now on finds no socket, and one already in the backlog is reset; both
        spawn a new holder."""
        if self.listener is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.paths.socket).st_ino == self._inode:
                os.unlink(self.paths.socket)
        self.listener.close()
        self.listener = None

    def check(self) -> None:
        """Rebind a socket someone removed; stop listening if its directory is gone."""
        if self.listener is None:
            return
        try:
            current: int | None = os.stat(self.paths.socket).st_ino
        except OSError:
            current = None
        if current == self._inode:
            return
        self.listener.close()
        self.listener = None
        if self.paths.directory.is_dir() and current is None:
            with contextlib.suppress(OSError):
                self.bind()
        if self.listener is None:
            logger.warning("holder socket %s is gone; serving no new commands", self.paths.socket)

    def accept(
        self, listener: socket.socket, handle: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        """Serve one connection: a peer of another uid, or a request without the workers'
        capability, is refused and logged; any other request gets ``handle``'s reply."""
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5.0)
            try:
                pid, uid, _gid = _UCRED.unpack(
                    conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
                )
                if uid != os.getuid():
                    logger.warning("holder: refused a connection from uid %d", uid)
                    return
                raw = read_line(conn)
                if not raw:
                    return
                request = json.loads(raw)
                offered = request.get("secret") if isinstance(request, dict) else None
                if not isinstance(offered, str) or not hmac.compare_digest(
                    offered.encode(), self.secret.encode()
                ):
                    logger.warning(
                        "holder: refused a request from pid %d without the workers' capability",
                        pid,
                    )
                    reply: dict[str, Any] = {
                        "ok": False,
                        "error": "refused: the request does not carry the workers' capability",
                    }
                else:
                    reply = handle(request)
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except (OSError, ValueError) as exc:
                logger.warning("holder: bad request: %s", exc)
