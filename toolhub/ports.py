"""Free TCP ports on this host, for servers started in-process or as children (the threaded
gateway, the local stack's Redis, tests). A leaf module: it imports nothing of toolhub."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it; another process may still take it
    before the caller binds, so callers that can should retry on ``EADDRINUSE``)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
