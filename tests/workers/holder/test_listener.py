"""The holder's socket on a real unix socket: mode 0600, requests answered only with the
workers' capability, rebound when removed, and unlinked on unbind only while it is its own."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path
from typing import Any

from workers.holder.client import HolderPaths, read_line
from workers.holder.listener import HolderSocket

SECRET = "s3cret-capability"


def holder_socket(tmp_path: Path) -> HolderSocket:
    directory = tmp_path / "holders"
    paths = HolderPaths(
        directory,
        directory / "h.sock",
        directory / "h.lock",
        directory / "h.spawn.lock",
        directory / "h.log",
        directory / "h.secret",
    )
    paths.prepare()
    sock = HolderSocket(paths)
    sock.secret = SECRET
    sock.bind()
    return sock


def ask(sock: HolderSocket, request: dict[str, Any]) -> dict[str, Any]:
    """Send ``request`` and let the holder socket serve it on another thread."""
    seen: list[dict[str, Any]] = []

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        seen.append(req)
        return {"ok": True, "op": req.get("op")}

    assert sock.listener is not None
    server = threading.Thread(target=sock.accept, args=(sock.listener, handle))
    server.start()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(30)
        client.connect(os.fspath(sock.paths.socket))
        client.sendall(json.dumps(request).encode() + b"\n")
        reply = json.loads(read_line(client))
    server.join(30)
    assert reply.get("ok") is False or seen == [request]
    return reply  # type: ignore[no-any-return]


def test_the_socket_is_private_to_its_owner(tmp_path: Path) -> None:
    sock = holder_socket(tmp_path)
    try:
        assert stat.S_IMODE(os.stat(sock.paths.socket).st_mode) == 0o600
    finally:
        sock.unbind()


def test_a_request_without_the_capability_is_refused_and_one_with_it_is_served(
    tmp_path: Path,
) -> None:
    sock = holder_socket(tmp_path)
    try:
        for hostile in ({"op": "ping"}, {"op": "ping", "secret": "guess"}, {"secret": 7}):
            reply = ask(sock, hostile)
            assert reply["ok"] is False and "capability" in reply["error"]
        assert ask(sock, {"op": "ping", "secret": SECRET}) == {"ok": True, "op": "ping"}
    finally:
        sock.unbind()


def test_a_removed_socket_is_rebound_and_unbind_leaves_anothers_socket(tmp_path: Path) -> None:
    sock = holder_socket(tmp_path)
    os.unlink(sock.paths.socket)
    sock.check()
    assert sock.listener is not None and sock.paths.socket.exists()
    assert ask(sock, {"op": "ping", "secret": SECRET})["ok"] is True
    # Another holder's socket now at the path: this one stops listening, and leaves it.
    os.unlink(sock.paths.socket)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(os.fspath(sock.paths.socket))
    try:
        sock.check()
        assert sock.listener is None
        sock.unbind()
        assert sock.paths.socket.exists()
    finally:
        other.close()
