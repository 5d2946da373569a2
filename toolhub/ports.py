"""Free TCP ports on this host, for servers started in-process or as children (the threaded
gateway, the local stack's Redis, tests). A leaf module: it imports nothing of toolhub.

A port is picked below the range the kernel hands out to outgoing connections (Linux:
``ip_local_port_range``): a port taken from that range by ``bind(0)`` can be given to any
process's next client connection between the check and the server's own bind, which many
parallel test processes (each with Redis clients) make likely."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: The lowest port picked; below it are the well-known and commonly configured ports.
LOWEST = 10_000
_TRIES = 64


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (32768 when unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (another server may still take it before the
    caller binds, so callers that can should retry on ``EADDRINUSE``)."""
    high = _ephemeral_low() - 1
    for _ in range(_TRIES if high > LOWEST else 0):
        port = random.randint(LOWEST, high)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def bind_refused(host: str, port: int) -> str | None:
    """Why a server could not listen on ``host:port`` (``address already in use``), or None.
    Checked before a server says it is starting, so a port in use is one line, not a startup
    log ending in the bind error. Bound the way servers bind (``SO_REUSEADDR``), so a port left
    in ``TIME_WAIT`` is not called taken."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as err:
        return f"cannot resolve {host}: {err}"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as err:
                return err.strerror or str(err)
    return None
