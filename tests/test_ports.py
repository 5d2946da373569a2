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
    # Two ports in range, the first taken: never the taken one. Both below the kernel's range
    # for outgoing connections, and the second free when the test starts (a port next to one
    # ``bind(0)`` gave can be another process's client connection, the failure this module
    # exists to avoid).
    with socket.socket() as taken:
        busy = _a_free_pair()
        taken.bind(("127.0.0.1", busy))
        taken.listen()
        monkeypatch.setattr(ports, "LOWEST", busy)
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: busy + 2)
        assert {ports.free_port() for _ in range(20)} == {busy + 1}


def _a_free_pair() -> int:
    """A port that, with the next one, nothing is bound to below the outgoing range."""
    for port in range(ports.LOWEST + 7_000, ports._ephemeral_low() - 1, 2):
        with socket.socket() as first, socket.socket() as second:
            try:
                first.bind(("127.0.0.1", port))
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two free ports next to each other")
