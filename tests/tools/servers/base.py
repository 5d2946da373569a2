"""A threaded HTTP server on 127.0.0.1 with a route table, for tests that speak real HTTP.

Routes map ``(method, path)`` to a handler that gets the parsed request and returns a
``Reply``. Every request is recorded, so a test can assert what reached the server (and what
never did). A reply may ``delay_s`` before answering, to drive client timeouts.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    chunks: list[bytes] | None = None


Handler = Callable[[Request], Reply]


class LocalServer:
    """``with LocalServer() as srv: srv.route("GET", "/x", handler); srv.url("/x")``.

    With ``tls`` (a server-side SSL context) it speaks HTTPS instead."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[Request] = []
        self.scheme = "https" if tls is not None else "http"
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def route(self, method: str, path: str, handler: Handler | Reply) -> None:
        self.routes[(method, path)] = handler if callable(handler) else (lambda _r: handler)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                server.requests.append(request)
                handler = server.routes.get((self.command, parts.path))
                reply = handler(request) if handler else Reply(404, b"not found")
                if reply.delay_s and server._stop.wait(reply.delay_s):
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                try:
                    if reply.chunks is not None:
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for chunk in reply.chunks:
                            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.send_header("Content-Length", str(len(reply.body)))
                        self.end_headers()
                        self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    return

            do_GET = do_POST = do_DELETE = do_PUT = _serve

        return _Handler


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll ``predicate`` until true or ``timeout_s`` (for state a server thread changes)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
