"""The protocol edges of ``toolhub mcp``, in raw JSON-RPC so that every frame is seen: a
cancelled request gets no answer (stdio and streamable HTTP), and stdin's EOF ends the stdio
server with exit code 0, the running call killed and nothing written for it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.support import make_builder
from tests.mcp.stdio_support import INITIALIZE, INITIALIZED, RawStdio
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(240)


def call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "p"}},
    }


def cancel(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "the user changed their mind"},
    }


def started_command(marker: Path, seconds: float) -> dict[str, Any]:
    """A command that says it started (a progress frame), then would touch ``marker``."""
    return {"command": f"echo started; sleep {seconds}; touch {marker}", "description": "nap"}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_stdio_cancelled_request_gets_no_answer(tmp_path: Path, workspace: Path) -> None:
    raw = RawStdio(tmp_path, workspace)
    try:
        raw.handshake()
        raw.send(call(2, "bash", started_command(tmp_path / "marker", 30)))
        progress = raw.recv()
        assert progress is not None and progress["method"] == "notifications/progress"
        raw.send(cancel(2))
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        seen = []
        while (frame := raw.recv()) is not None and frame.get("id") != 3:
            seen.append(frame)
        assert frame == {"jsonrpc": "2.0", "id": 3, "result": {}}
        raw.close_stdin()
        seen += raw.rest()
        assert not [f for f in seen if f.get("id") == 2], seen
        assert raw.proc.wait(30) == 0
    finally:
        raw.kill()


def test_eof_exits_cleanly_and_kills_the_running_call(tmp_path: Path, workspace: Path) -> None:
    marker = tmp_path / "marker"
    raw = RawStdio(tmp_path, workspace)
    try:
        raw.handshake()
        raw.send(call(2, "bash", started_command(marker, 2)))
        progress = raw.recv()
        assert progress is not None and progress["method"] == "notifications/progress"
        started = time.monotonic()
        raw.close_stdin()
        assert raw.rest() == [], "nothing is written for the call EOF interrupted"
        assert raw.proc.wait(30) == 0
        assert raw.proc.stderr is not None and "Traceback" not in raw.proc.stderr.read()
        time.sleep(max(0.0, 3 - (time.monotonic() - started)))
        assert not marker.exists(), "the command was killed, not left running"
    finally:
        raw.kill()


def test_requests_piped_before_eof_are_still_answered(tmp_path: Path, workspace: Path) -> None:
    raw = RawStdio(tmp_path, workspace)
    try:
        for frame in (INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "ping"}):
            raw.send(frame)
        raw.close_stdin()
        assert [f.get("id") for f in raw.rest()] == [1, 2]
        assert raw.proc.wait(30) == 0
    finally:
        raw.kill()


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_http_cancelled_request_gets_no_answer(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    session = Session.embedded(
        None, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    )
    marker = tmp_path / "nap.marker"
    with session, ThreadedServer(http_app(session, host="127.0.0.1")) as server:
        url = f"{server.url}/mcp"
        with httpx.Client(timeout=30) as http:
            opened = http.post(url, headers=HEADERS, json=INITIALIZE)
            headers = {
                **HEADERS,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-06-18",
            }
            assert http.post(url, headers=headers, json=INITIALIZED).status_code == 202
            events: list[str] = []
            first = threading.Event()

            def stream() -> None:
                nap = call(2, "nap", {"seconds": 30, "marker": str(marker)})
                with http.stream("POST", url, headers=headers, json=nap) as response:
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            events.append(line)
                            first.set()

            reader = threading.Thread(target=stream)
            reader.start()
            assert first.wait(10), "the nap reported progress"
            assert http.post(url, headers=headers, json=cancel(2)).status_code == 202
            reader.join(10)
            assert not reader.is_alive(), "the cancelled request's stream ended"
    assert events and all("notifications/progress" in e for e in events), events
    assert marker.read_text() == "cancelled"
