"""``CallShortcut``: a plain JSON call is started and answered without FastAPI's router, with
the same answer the route gives; every other request (and every call it declines) reaches
FastAPI, body and all, and gets FastAPI's answer. A real gateway over HTTP; what the shortcut
passes on is seen by a recorder put between it and FastAPI."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.gateway.support import session_factory, sse_events
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.shortcut import CallShortcut


class PassedOn:
    """The ASGI app behind the shortcut, recording each request it is given and its body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[tuple[str, bytes]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        parts: list[bytes] = []

        async def recording() -> Any:
            message = await receive()
            parts.append(message.get("body", b""))
            return message

        try:
            await self.app(scope, recording, send)
        finally:
            self.seen.append((scope["path"], b"".join(parts)))


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[httpx.Client, PassedOn, str]]:
    root = tmp_path / "root"
    root.mkdir()
    app = create_app(
        GatewaySettings(workspace=root, keepalive_s=0.5), factory=session_factory(tmp_path)
    )
    with ThreadedServer(app) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        sid = client.post("/v1/sessions", json={}).json()["session_id"]  # builds the stack
        node: Any = app.middleware_stack
        while not isinstance(node, CallShortcut):
            node = node.app
        recorder = PassedOn(node.app)
        node.app = recorder
        yield client, recorder, sid


def _calls(recorder: PassedOn, sid: str) -> list[bytes]:
    return [body for path, body in recorder.seen if path == f"/v1/sessions/{sid}/calls"]


def test_a_plain_call_is_answered_as_the_route_answers_it(
    gateway: tuple[httpx.Client, PassedOn, str],
) -> None:
    client, recorder, sid = gateway
    body = {"name": "echo", "arguments": {"text": "hi", "times": 2}}
    short = client.post(f"/v1/sessions/{sid}/calls", json={**body, "call_id": "c-short"})
    assert _calls(recorder, sid) == []
    # A query string is one of the cases the shortcut leaves to FastAPI's route.
    routed = client.post(
        f"/v1/sessions/{sid}/calls?cancel_on_disconnect=false", json={**body, "call_id": "c-route"}
    )
    assert len(_calls(recorder, sid)) == 1
    assert short.status_code == routed.status_code == 200
    assert short.headers["content-type"] == routed.headers["content-type"]
    assert short.json() == {**routed.json(), "call_id": "c-short"}
    assert short.json()["prompt_text"] == "echo: hihi"
    # Counted as FastAPI would count it: by the route's template.
    metrics = client.get("/metrics").text
    assert 'method="POST",route="/v1/sessions/{session_id}/calls",status="200"} 2.0' in metrics


@pytest.mark.parametrize(
    ("content", "headers", "status"),
    [
        (b'{"name": "echo", "arguments": {', {}, 422),  # JSON cut short
        (b'{"name": "echo", "surplus": 1}', {}, 422),  # the model forbids extra fields
        (b'{"name": "echo", "call_id": "no spaces"}', {}, 422),
        (b'{"name": "echo"}', {"content-type": "text/plain"}, 422),
        (b"\xff\xfe{}", {}, 422),  # not UTF-8
    ],
)
def test_a_refused_body_gets_fastapis_answer(
    gateway: tuple[httpx.Client, PassedOn, str],
    content: bytes,
    headers: dict[str, str],
    status: int,
) -> None:
    client, recorder, sid = gateway
    response = client.post(
        f"/v1/sessions/{sid}/calls",
        content=content,
        headers={"content-type": "application/json", **headers},
    )
    assert response.status_code == status, response.text
    assert "detail" in response.json()
    assert _calls(recorder, sid) == [content]  # FastAPI got the whole body, as sent


def test_streams_sessions_and_conflicts_are_left_to_the_route(
    gateway: tuple[httpx.Client, PassedOn, str],
) -> None:
    client, recorder, sid = gateway
    streamed = client.post(
        f"/v1/sessions/{sid}/calls",
        json={"name": "count", "arguments": {"n": 2}},
        headers={"accept": "text/event-stream"},
    )
    assert [e["event"] for e in sse_events(streamed.text)][-1] == "result"
    unknown = client.post("/v1/sessions/nobody/calls", json={"name": "echo"})
    assert unknown.status_code == 404 and "nobody" in unknown.json()["detail"]
    running = {"name": "nap", "arguments": {"seconds": 5}, "call_id": "c-nap"}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, f"/v1/sessions/{sid}/calls", json=running)
        deadline = time.monotonic() + 10
        while client.get(f"/v1/sessions/{sid}/calls/c-nap").status_code != 200:
            assert time.monotonic() < deadline, "the first nap never started"
            time.sleep(0.02)
        again = client.post(f"/v1/sessions/{sid}/calls", json=running)
        assert again.status_code == 409 and "still running" in again.json()["detail"]
        assert client.delete(f"/v1/sessions/{sid}/calls/c-nap").status_code == 202
        assert first.result().json()["error"]["kind"] == "cancelled"
    passed = _calls(recorder, sid)
    # The stream and the conflicting call went on to FastAPI; the first nap did not.
    assert len(passed) == 2 and b'"c-nap"' in passed[1] and b'"c-nap"' not in passed[0]
