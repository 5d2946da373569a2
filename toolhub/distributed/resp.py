"""A bare Redis pub/sub connection: one socket, hiredis parsing, nothing else.

The dispatcher's hub reads every progress frame of every call it follows; redis-py's pub/sub
object spends per message on bookkeeping this hub does not need. Here a
read is ``poll`` + ``recv`` + hiredis, and commands are written whole under a lock, so other
threads may (un)subscribe while the reader thread blocks.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from typing import Any

import hiredis
from redis.connection import SSLConnection, parse_url

from .replies import untyped


class RespError(ConnectionError):
    pass


class PubSubConnection:
    def __init__(self, url: str, connect_timeout: float = 2.0) -> None:
        self.params: dict[str, Any] = untyped(parse_url)(url)
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
            if params.get("connection_class") is SSLConnection:
                sock = ssl.create_default_context().wrap_socket(
                    sock, server_hostname=params.get("host")
                )
        if params.get("password"):
            auth = ["AUTH", params["password"]]
            if params.get("username"):
                auth.insert(1, params["username"])
            sock.sendall(hiredis.pack_command(tuple(auth)))
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
            self._sock.sendall(untyped(hiredis.pack_command)(args))

    def read(self, timeout: float) -> list[Any]:
        """Every complete reply available within ``timeout`` seconds (maybe none)."""
        replies = self._drain()
        if replies:
            return replies
        pending = isinstance(self._sock, ssl.SSLSocket) and self._sock.pending()
        if not pending:
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
