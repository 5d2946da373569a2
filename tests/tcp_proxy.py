"""A TCP proxy a test can freeze: a network partition between one process and its Redis.

Frozen, it forwards nothing in either direction and new connections hang after their handshake,
as when a switch drops a host's packets (a client sees timeouts, not a reset). Thawed, it
forwards again; a connection whose end closed meanwhile is closed on the other side too.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class FreezableProxy:
    """Listens on 127.0.0.1 (``port``) and forwards every connection to ``target``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._socks: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks, self._socks = list(self._socks), set()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pair, args=(client,), daemon=True).start()

    def _pair(self, client: socket.socket) -> None:
        self._flowing.wait()
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        with self._lock:
            self._socks.update((client, upstream))
        try:
            self._pump(client, upstream)
        finally:
            with self._lock:
                self._socks.difference_update((client, upstream))
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        other = {a: b, b: a}
        while not self._closed.is_set():
            if not self._flowing.wait(0.2):
                continue
            try:
                ready, _, _ = select.select([a, b], [], [], 0.2)
            except (OSError, ValueError):
                return
            for sock in ready:
                self._flowing.wait()  # frozen between the select and the read: hold the bytes
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                try:
                    other[sock].sendall(data)
                except OSError:
                    return
