"""An MCP session over streamable HTTP belongs to the principal that opened it: another
principal presenting its ``Mcp-Session-Id`` gets 404 for everything (it can neither cancel the
owner's request, nor list, open the stream or end the session), while the owner's work goes
on; the refusal is logged with the principal, never with a token."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.gateway.support import make_builder
from tests.mcp.stdio_support import INITIALIZE, INITIALIZED
from tests.mcp.test_mcp_lifecycle import HEADERS, call, cancel
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(180)

NOT_FOUND = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Session not found"},
}


def test_another_principal_cannot_use_an_mcp_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "ws").mkdir()
    session = Session.embedded(
        None, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    )
    marker = tmp_path / "nap.marker"
    app = http_app(session, host="127.0.0.1", token="token-alice,token-bob")
    caplog.set_level(logging.WARNING, logger="toolhub")
    with session, ThreadedServer(app) as server, httpx.Client(timeout=30) as http:
        url = f"{server.url}/mcp"
        alice = {**HEADERS, "Authorization": "Bearer token-alice"}
        opened = http.post(url, headers=alice, json=INITIALIZE)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        alice |= {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        assert http.post(url, headers=alice, json=INITIALIZED).status_code == 202
        events: list[str] = []
        first = threading.Event()

        def stream() -> None:
            nap = call(2, "nap", {"seconds": 30, "marker": str(marker)})
            with http.stream("POST", url, headers=alice, json=nap) as response:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        events.append(line)
                        first.set()

        reader = threading.Thread(target=stream)
        reader.start()
        assert first.wait(10), "the nap reported progress"

        bob = {**alice, "Authorization": "Bearer token-bob"}
        listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        for refused in (
            http.post(url, headers=bob, json=cancel(2)),
            http.post(url, headers=bob, json=listing),
            http.get(url, headers={**bob, "Accept": "text/event-stream"}),
            http.delete(url, headers=bob),
        ):
            assert refused.status_code == 404, refused.text
            assert refused.json() == NOT_FOUND
        time.sleep(0.5)
        assert not marker.exists(), "bob's cancel reached nothing"
        listed = http.post(url, headers=alice, json=listing)
        assert listed.status_code == 200 and '"nap"' in listed.text, "alice's session lives on"

        assert http.post(url, headers=alice, json=cancel(2)).status_code == 202
        reader.join(10)
        assert not reader.is_alive()
        assert http.delete(url, headers=alice).status_code == 200
        assert http.post(url, headers=alice, json=listing).status_code == 404, "ended"
    assert marker.read_text() == "cancelled"
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("toolhub")]
    refusals = [m for m in ours if "MCP session" in m]
    assert sum("principal default/token-2" in m for m in refusals) == 4
    assert sum("principal default/token-1" in m for m in refusals) == 1  # the ended session
    assert not any("token-bob" in m or sid in m for m in ours), "no token, no whole session id"
