"""toolhub's MCP server over streamable HTTP driven by the real ``curl`` binary: one JSON-RPC
POST per request, with the headers each protocol era requires typed out by hand
(docs/interfaces.md, "With curl").

- 2026-07-28: no handshake and no session; each request carries ``MCP-Protocol-Version``,
  ``Mcp-Method`` (and ``Mcp-Name`` for ``tools/call``) as headers and the protocol version and
  client capabilities in ``params._meta``. ``tools/list``, a call, a call with progress (SSE),
  an unknown tool's ``-32602`` with its suggestions, and what a missing header costs.
- The handshake era (2025-11-25): ``initialize``, ``notifications/initialized``, ``tools/call``
  with the ``Mcp-Session-Id`` curl carries from the first answer, then ``DELETE``.
- The bearer token: 401 without it; another token's session is not found.

The server is ``toolhub.mcp.transports.http_app`` (what ``toolhub mcp --transport http``
serves) on an embedded session of the test tools, in this process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.curl import BOTH, JSON, Answer, curl, needs_curl
from tests.gateway.support import make_builder, sse
from toolhub import Session
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = [needs_curl, pytest.mark.timeout(120)]

TOKEN, OTHER = "tok-a", "tok-b"
AUTH = f"Authorization: Bearer {TOKEN}"
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "any"},
}


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "ws").mkdir()
    session = Session.embedded(
        None, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    )
    app = http_app(session, host="127.0.0.1", token=f"{TOKEN},{OTHER}")
    with session, ThreadedServer(app) as server:
        yield f"{server.url}/mcp"


def modern(url: str, request_id: int, method: str, params: dict[str, Any], *flags: str) -> Answer:
    """One self-contained 2026-07-28 request, every header typed as a curl user would."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": {**params.get("_meta", {}), **ENVELOPE}},
    }
    named = ("-H", f"Mcp-Name: {params['name']}") if "name" in params else ()
    return curl(
        "-H", AUTH, "-H", JSON, "-H", BOTH,
        "-H", f"MCP-Protocol-Version: {MODERN}",
        "-H", f"Mcp-Method: {method}",
        *named, *flags,
        "-d", json.dumps(body),
        url,
    )  # fmt: skip


def test_2026_list_and_call_as_single_posts(url: str) -> None:
    listed = modern(url, 1, "tools/list", {})
    assert listed.status == 200 and listed.media == "application/json"
    assert "mcp-session-id" not in listed.headers, "2026-07-28 is stateless"
    answer = listed.json()
    assert answer["id"] == 1 and answer["result"]["resultType"] == "complete"
    tools = {t["name"]: t for t in answer["result"]["tools"]}
    assert list(tools) == ["echo", "count", "nap", "ask"]
    assert tools["echo"]["annotations"] == {"readOnlyHint": True}
    assert tools["echo"]["inputSchema"]["required"] == ["text"]

    called = modern(url, 2, "tools/call", {"name": "echo", "arguments": {"text": "hi", "times": 2}})
    assert called.status == 200 and called.media == "application/json"
    result = called.json()["result"]
    assert result["content"] == [{"type": "text", "text": "echo: hihi"}]
    assert result["isError"] is False and result["resultType"] == "complete"


def test_2026_unknown_tool_is_a_typed_error_with_suggestions(url: str) -> None:
    unknown = modern(url, 3, "tools/call", {"name": "ech", "arguments": {"text": "hi"}})
    assert unknown.status == 400 and unknown.media == "application/json"
    assert unknown.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32602,
            "message": "Unknown tool `ech`. Did you mean `echo`?",
            "data": {"suggestions": ["echo"]},
        },
    }


def test_2026_progress_then_the_result_over_sse(url: str) -> None:
    params = {"name": "count", "arguments": {"n": 3}, "_meta": {"progressToken": "p1"}}
    streamed = modern(url, 4, "tools/call", params, "-N")
    assert streamed.status == 200 and streamed.media == "text/event-stream"
    events = [e["data"] for e in sse(streamed.body)]
    *progress, last = events
    assert progress, events
    assert {p["method"] for p in progress} == {"notifications/progress"}
    assert all(p["params"]["progressToken"] == "p1" for p in progress)
    steps = [p["params"]["progress"] for p in progress]
    assert steps == sorted(set(steps)) and steps[-1] == 3, steps  # merged ticks count on
    assert "".join(p["params"]["message"] for p in progress) == "step 0step 1step 2"
    assert last["id"] == 4 and last["result"]["structuredContent"] == {"total": 3}


def test_2026_what_a_missing_header_costs(url: str) -> None:
    """The refusals a curl user meets first: each says what is wrong, none runs the call."""
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/list",
        "params": {"_meta": ENVELOPE},
    }
    common = ("-H", AUTH, "-H", f"MCP-Protocol-Version: {MODERN}")
    no_method = curl(*common, "-H", JSON, "-H", BOTH, "-d", json.dumps(body), url)
    assert no_method.status == 400
    assert no_method.json()["error"] == {
        "code": -32020,
        "message": "mcp-method header does not match the request body's method",
    }
    # ``--json`` alone says ``Accept: application/json``; this server streams (SSE) when a
    # call reports progress, so it wants both types named.
    json_only = curl(*common, "-H", "Mcp-Method: tools/list", "--json", json.dumps(body), url)
    assert json_only.status == 406
    no_envelope = {**body, "params": {}}
    bare = curl(*common, "-H", "Mcp-Method: tools/list", "-H", JSON, "-H", BOTH,
                "-d", json.dumps(no_envelope), url)  # fmt: skip
    assert bare.status == 400 and bare.json()["error"]["code"] == -32602
    assert "io.modelcontextprotocol/protocolVersion" in bare.json()["error"]["message"]


def handshake(url: str, session_id: str | None, body: dict[str, Any], token: str = TOKEN) -> Answer:
    headers = ["-H", f"Authorization: Bearer {token}", "-H", JSON, "-H", BOTH]
    if session_id is not None:
        headers += [
            "-H",
            f"Mcp-Session-Id: {session_id}",
            "-H",
            f"MCP-Protocol-Version: {HANDSHAKE}",
        ]
    return curl("-N", *headers, "-d", json.dumps(body), url)


def test_handshake_era_carries_the_session_id(url: str) -> None:
    opened = handshake(
        url,
        None,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": HANDSHAKE,
                "capabilities": {},
                "clientInfo": {"name": "curl", "version": "any"},
            },
        },
    )
    assert opened.status == 200 and opened.media == "text/event-stream", opened
    sid = opened.headers["mcp-session-id"]
    [init] = [e["data"] for e in sse(opened.body)]
    assert init["result"]["protocolVersion"] == HANDSHAKE
    assert init["result"]["serverInfo"]["name"] == "toolhub"
    assert init["result"]["capabilities"]["tools"] == {"listChanged": True}

    ack = handshake(url, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert ack.status == 202 and ack.body == ""

    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "count", "arguments": {"n": 2}, "_meta": {"progressToken": 7}},
    }
    called = handshake(url, sid, call)
    assert called.status == 200 and called.headers["mcp-session-id"] == sid
    *progress, last = [e["data"] for e in sse(called.body)]
    assert progress and {p["method"] for p in progress} == {"notifications/progress"}
    assert last["id"] == 2 and last["result"]["content"] == [
        {"type": "text", "text": '{"total":2}'}
    ]

    unknown = handshake(url, sid, {**call, "id": 6, "params": {"name": "ech", "arguments": {}}})
    assert unknown.status == 200 and unknown.media == "text/event-stream"
    [refused] = [e["data"] for e in sse(unknown.body)]
    assert refused["id"] == 6 and refused["error"]["code"] == -32602
    assert refused["error"]["data"] == {"suggestions": ["echo"]}

    # The session is its opener's: another token's request finds no such session.
    foreign = handshake(url, sid, {**call, "id": 3}, token=OTHER)
    assert foreign.status == 404 and foreign.json()["error"]["message"] == "Session not found"
    # Without the id a request is not part of any session.
    lost = handshake(url, None, {**call, "id": 4})
    assert lost.status == 400 and "Missing session ID" in lost.json()["error"]["message"], lost

    ended = curl("-H", AUTH, "-H", f"Mcp-Session-Id: {sid}", "-X", "DELETE", url)
    assert ended.status == 200
    after = handshake(url, sid, {**call, "id": 5})
    assert after.status == 404 and after.json()["error"]["message"] == "Session not found"


def test_the_bearer_token(url: str) -> None:
    missing = curl("-H", JSON, "-H", BOTH, "-d", "{}", url)
    assert missing.status == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {"detail": "missing bearer token"}
    wrong = curl("--oauth2-bearer", "nope", "-H", JSON, "-H", BOTH, "-d", "{}", url)
    assert wrong.status == 401 and wrong.json() == {"detail": "wrong bearer token"}


@pytest.mark.parametrize("era", [MODERN, None], ids=["2026-07-28", "handshake"])
def test_a_form_body_is_refused(url: str, era: str | None) -> None:
    """``curl -d`` alone (a form ``Content-Type``, what a web page may post without a CORS
    preflight) is refused on either era before anything is read as JSON-RPC."""
    version = ("-H", f"MCP-Protocol-Version: {era}", "-H", "Mcp-Method: tools/list") if era else ()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    refused = curl("-H", AUTH, "-H", BOTH, *version, "-d", json.dumps(body), url)
    assert refused.status == 400 and refused.body == "Invalid Content-Type header"
    assert "mcp-session-id" not in refused.headers
