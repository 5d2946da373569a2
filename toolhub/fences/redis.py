"""The pub/sub reader's Redis connection: a hand-written one, or redis-py's own.

The dispatcher's hub (``distributed/pubsub.py``) reads every progress frame of every call it
follows; redis-py's pub/sub object costs tens of microseconds per message in bookkeeping this
hub does not need. ``RespConnection`` is one socket and hiredis parsing: a read is ``poll`` +
``recv`` + hiredis, and commands are written whole under a lock, so other threads may
(un)subscribe while the reader thread blocks. It speaks plain TCP or a Unix socket only.

The plain path, ``RedisPyConnection``, is redis-py's own ``Connection`` made from the URL by
``ConnectionPool.from_url``: every option of the URL is honoured as by every other client
toolhub makes. It is taken for every ``rediss://`` URL (TLS, with the URL's ``ssl_cert_reqs``,
``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_check_hostname``…; the threat: a
hand-written TLS handshake that skipped them would accept any certificate, or none of the
client's), and for every URL when ``TOOLHUB_PLAIN_LIBRARIES`` names ``redis`` (or ``all``).
Both raise ``RespError`` (an ``OSError``) when the connection fails or ends.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

import hiredis
import redis.exceptions
from redis.connection import AbstractConnection, ConnectionPool, parse_url

from . import plain

__all__ = ["PubSubConnection", "RedisPyConnection", "RespConnection", "RespError", "connect"]

#: hiredis's command packer and redis-py's URL parser (both untyped).
_pack_command = cast(Callable[[tuple[bytes | str, ...]], bytes], hiredis.pack_command)
_parse_url = cast(Callable[[str], dict[str, Any]], parse_url)


class RespError(ConnectionError):
    """The pub/sub connection failed or ended."""


class PubSubConnection(Protocol):
    def send(self, *args: bytes | str) -> None:
        """Write one command (from any thread; the reply arrives through ``read``)."""

    def read(self, timeout: float) -> list[Any]:
        """Every complete reply available within ``timeout`` seconds (maybe none)."""

    def close(self) -> None: ...


def connect(url: str, connect_timeout: float = 2.0) -> PubSubConnection:
    """A pub/sub connection to ``url``: hand-written for ``redis://`` and ``unix://``, redis-py's
    own for ``rediss://`` and on the plain path."""
    if plain("redis") or urlsplit(url).scheme == "rediss":
        return RedisPyConnection(url, connect_timeout)
    return RespConnection(url, connect_timeout)


class RespConnection:
    """The hand-written connection: one socket, hiredis parsing, nothing else."""

    def __init__(self, url: str, connect_timeout: float = 2.0) -> None:
        self.params = _parse_url(url)
        self.connect_timeout = connect_timeout
        self._reader = hiredis.Reader()
        self._send_lock = threading.Lock()
        self._sock = self._connect()

    def _connect(self) -> socket.socket:
        params = self.params
        sock: socket.socket
        if "path" in params:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.connect_timeout)
            sock.connect(params["path"])
        else:
            sock = socket.create_connection(
                (params.get("host", "localhost"), params.get("port", 6379)),
                timeout=self.connect_timeout,
            )
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if params.get("password"):
            auth = ["AUTH", params["password"]]
            if params.get("username"):
                auth.insert(1, params["username"])
            sock.sendall(_pack_command(tuple(auth)))
            reply = self._read_one(sock)
            if isinstance(reply, hiredis.ReplyError):
                sock.close()
                raise RespError(f"AUTH failed: {reply}")
        sock.settimeout(None)
        return sock

    def _read_one(self, sock: socket.socket) -> Any:
        while True:
            reply = self._reader.gets()
            if reply is not False:
                return reply
            data = sock.recv(4096)
            if not data:
                raise RespError("connection closed while authenticating")
            self._reader.feed(data)

    def send(self, *args: bytes | str) -> None:
        """Write one command (from any thread; the reply arrives through ``read``)."""
        with self._send_lock:
            self._sock.sendall(_pack_command(args))

    def read(self, timeout: float) -> list[Any]:
        """Every complete reply available within ``timeout`` seconds (maybe none)."""
        replies = self._drain()
        if replies:
            return replies
        # poll, not select: a busy process's descriptors run past select's 1024.
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        if not poller.poll(timeout * 1000):
            return []
        data = self._sock.recv(65536)
        if not data:
            raise RespError("Redis closed the pub/sub connection")
        self._reader.feed(data)
        return self._drain()

    def _drain(self) -> list[Any]:
        out = []
        while (reply := self._reader.gets()) is not False:
            out.append(reply)
        return out

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


class RedisPyConnection:
    """The plain connection: redis-py's ``Connection`` for the URL, every option honoured."""

    def __init__(self, url: str, connect_timeout: float = 2.0) -> None:
        # RESP2: pub/sub frames are plain replies (RESP3 sends them as pushes, which
        # ``read_response`` hands to a push handler instead of returning them).
        pool = ConnectionPool.from_url(url, socket_connect_timeout=connect_timeout, protocol=2)
        self._send_lock = threading.Lock()
        try:
            self._conn = cast(AbstractConnection, pool.get_connection())
        except redis.exceptions.RedisError as exc:
            raise RespError(f"cannot connect to Redis: {exc}") from exc

    def send(self, *args: bytes | str) -> None:
        with self._send_lock:
            try:
                self._conn.send_command(*args)  # type: ignore[no-untyped-call]
            except redis.exceptions.RedisError as exc:
                raise RespError(str(exc)) from exc

    def read(self, timeout: float) -> list[Any]:
        out: list[Any] = []
        try:
            wait = timeout
            while self._conn.can_read(timeout=wait):
                out.append(self._conn.read_response())
                wait = 0
        except redis.exceptions.RedisError as exc:
            raise RespError(str(exc)) from exc
        return out

    def close(self) -> None:
        self._conn.disconnect()  # type: ignore[no-untyped-call]
