"""A stdio MCP server behind a streamable-HTTP URL, so that the conformance suite (which drives
only a URL) reaches ``toolhub mcp`` on stdio.

Each MCP session the suite opens (an ``initialize`` POST without ``Mcp-Session-Id``) starts its
own server process; its JSON-RPC frames pass through untouched, one line each way. A POSTed
request is answered with an SSE stream carrying every frame the server writes until the response
with that request's id (its progress notifications and its ``elicitation/create`` requests
included); a POSTed notification or response is written and answered 202. GET is 405 (no
standalone stream), DELETE ends the session's process. The bridge judges nothing: what the
suite checks is what the stdio server wrote. Its own HTTP rules (Origin, SSE event ids) are not
toolhub's, so the scenarios about them are not run through it.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Child:
    """One stdio server: frames in through ``send``, frames out on ``frames``."""

    def __init__(self, command: list[str], **popen: Any) -> None:
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            **popen,
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.frames.put(json.loads(line))
        self.frames.put(None)

    def send(self, frame: Any) -> None:
        assert self.proc.stdin is not None
        with self.lock:
            self.proc.stdin.write(json.dumps(frame) + "\n")
            self.proc.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def stdio_bridge(command: list[str], **popen: Any) -> Iterator[str]:
    """Serve ``command`` (a stdio MCP server) per session at the yielded ``/mcp`` URL."""
    children: dict[str, _Child] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _plain(self, status: int, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self._plain(405, {"Allow": "POST, DELETE"})

        def do_DELETE(self) -> None:
            child = children.pop(self.headers.get("Mcp-Session-Id", ""), None)
            if child is not None:
                child.close()
            self._plain(200 if child else 404)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            session = self.headers.get("Mcp-Session-Id")
            if session is None and isinstance(body, dict) and body.get("method") == "initialize":
                session = uuid.uuid4().hex
                children[session] = _Child(command, **popen)
            child = children.get(session or "")
            if child is None:
                self._plain(404)
                return
            child.send(body)
            if not (isinstance(body, dict) and "method" in body and "id" in body):
                self._plain(202)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Mcp-Session-Id", session or "")
            self.send_header("Connection", "close")
            self.end_headers()
            while (frame := child.frames.get(timeout=120)) is not None:
                self.wfile.write(f"event: message\ndata: {json.dumps(frame)}\n\n".encode())
                self.wfile.flush()
                if frame.get("id") == body["id"] and "method" not in frame:
                    break
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        for child in children.values():
            child.close()
