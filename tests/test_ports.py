"""``free_port`` picks ports a server can bind and that no client connection will be handed
meanwhile: below the kernel's range for outgoing connections, never one something listens on."""

from __future__ import annotations

import socket

from toolhub import ports


def test_a_free_port_is_below_the_range_of_outgoing_connections_and_bindable() -> None:
    low = ports._ephemeral_low()
    for _ in range(50):
        port = ports.free_port()
        assert ports.LOWEST <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_never_picked(monkeypatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(ports, "LOWEST", busy)
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: busy + 2)
        # Two ports in range, one taken: never the taken one.
        assert {ports.free_port() for _ in range(20)} <= {busy + 1} | set(range(busy + 2, 65536))
