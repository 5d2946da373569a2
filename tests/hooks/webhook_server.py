"""A real HTTP server playing an operator's hook service: it records each JSON payload and
answers by path (``/rewrite``, ``/deny``, ``/slow``, ``/broken``, ``/redact``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HookService:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.received: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    def url(self, path: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}{path}"


def _answer(path: str, payload: dict[str, Any]) -> tuple[int, Any]:
    if path == "/rewrite":
        arguments = dict(payload["arguments"])
        arguments["command"] = str(arguments["command"]).replace("REWRITE_ME", "by-webhook")
        return 200, {"action": "rewrite", "arguments": arguments, "note": "rewritten remotely"}
    if path == "/deny":
        return 200, {"action": "deny", "reason": "the webhook said no"}
    if path == "/slow":
        time.sleep(3)
        return 200, {}
    if path == "/broken":
        return 500, {"error": "down"}
    if path == "/redact":
        text = payload.get("text")
        output = payload.get("output")
        if isinstance(output, dict) and isinstance(output.get("delta"), str):
            output = {**output, "delta": output["delta"].replace("classified", "[gone]")}
        if isinstance(output, dict) and isinstance(output.get("output"), str):
            output = {**output, "output": output["output"].replace("classified", "[gone]")}
        new_text = text.replace("classified", "[gone]") if isinstance(text, str) else text
        return 200, {"text": new_text, "output": output}
    return 404, {}


@contextmanager
def hook_service() -> Iterator[HookService]:
    holder: list[HookService] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            payload = json.loads(self.rfile.read(length))
            holder[0].received.append((self.path, dict(self.headers), payload))
            status, answer = _answer(self.path, payload)
            body = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the caller stopped waiting (``/slow``)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    holder.append(HookService(server))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
