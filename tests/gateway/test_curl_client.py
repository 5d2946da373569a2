"""The gateway's HTTP API driven by the real ``curl`` binary, as a person reading
docs/interfaces.md ("With curl") would type it: a session with a tool config, a call and its
JSON result, an unknown tool's typed error with its "did you mean", a call's events over SSE
with ``curl -N`` (live, then replayed), a bearer token refused or missing, and a body sent with
curl's default form ``Content-Type`` answered with what to send instead.

An embedded gateway (``make_gateway``, uvicorn in this process) on the test tools: its HTTP
surface is the distributed one's, and nothing here is about the workers.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.curl import JSON, Answer, curl, needs_curl, parse, streaming
from tests.gateway.conftest import MakeGateway
from tests.gateway.support import sse

pytestmark = [needs_curl, pytest.mark.timeout(120)]

TOKEN = "curl-s3cret"
AUTH = f"Authorization: Bearer {TOKEN}"
SAY_RAN = 'toolhub_calls_total{outcome="ok",tool="say"}'
CONFIG = {"tools": [{"id": "Main:echo", "name": "say"}, {"id": "Main:count"}, {"id": "Main:nap"}]}


@pytest.fixture
def url(make_gateway: MakeGateway) -> str:
    return make_gateway(api_token=TOKEN)


def session(url: str) -> str:
    created = curl(
        "-H", AUTH, "-H", JSON, "-d", json.dumps({"config": CONFIG}), f"{url}/v1/sessions"
    )
    assert created.status == 201, created
    assert created.media == "application/json"
    body = created.json()
    assert body["created"] is True and body["tools"] == 3 and body["warnings"] == []
    return str(body["session_id"])


def call(url: str, sid: str, payload: dict[str, object], *flags: str) -> Answer:
    return curl("-H", AUTH, *flags, "--json", json.dumps(payload), f"{url}/v1/sessions/{sid}/calls")


def test_a_session_a_call_and_an_unknown_tool(url: str) -> None:
    sid = session(url)
    listed = curl("-H", AUTH, f"{url}/v1/sessions/{sid}/tools?format=mcp")
    assert listed.status == 200
    assert [t["name"] for t in listed.json()] == ["say", "count", "nap"]

    done = call(url, sid, {"name": "say", "arguments": {"text": "hi", "times": 2}})
    assert done.status == 200 and done.media == "application/json"
    result = done.json()
    assert result["is_error"] is False and result["error"] is None
    assert result["output"] == {"tag": "tool", "tool_id": "Main:echo", "value": {"echoed": "hihi"}}
    assert result["prompt_text"] == "echo: hihi" and result["name"] == "say"
    record = curl("-H", AUTH, f"{url}/v1/sessions/{sid}/calls/{result['call_id']}").json()
    assert record["status"] == "succeeded" and record["tool"] == "Main:echo"

    # A failed call is the call's outcome (HTTP 200), typed; the transport is fine.
    unknown = call(url, sid, {"name": "sya", "arguments": {"text": "hi"}})
    assert unknown.status == 200, unknown
    failed = unknown.json()
    assert failed["is_error"] is True and failed["output"] is None
    assert failed["error"]["kind"] == "not_found"
    assert failed["error"]["details"] == {"tool": "sya", "suggestions": ["say"]}
    assert "Did you mean: `say`?" in failed["error"]["detail"]
    assert failed["prompt_text"].startswith("Tool `sya` failed: Unknown tool `sya`.")

    gone = curl("-H", AUTH, "-X", "DELETE", f"{url}/v1/sessions/{sid}")
    assert gone.status == 204 and gone.body == ""
    assert curl("-H", AUTH, f"{url}/v1/sessions/{sid}/tools").status == 404


def test_events_over_sse_with_curl_n(url: str) -> None:
    sid = session(url)
    body = {"name": "count", "arguments": {"n": 3}, "call_id": "c-count"}
    streamed = call(url, sid, body, "-N", "-H", "Accept: text/event-stream")
    assert streamed.status == 200 and streamed.media == "text/event-stream"
    events = sse(streamed.body)
    assert [(e["event"], e["id"]) for e in events] == [
        ("progress", "1"),
        ("progress", "2"),
        ("progress", "3"),
        ("result", "4"),
    ]
    assert [e["data"] for e in events[:3]] == [
        {"kind": "text", "text": f"step {i}"} for i in range(3)
    ]
    assert events[-1]["data"]["output"]["value"] == {"total": 3}
    assert events[-1]["data"]["call_id"] == "c-count"

    # The same events again from the call's event route, after the second one.
    replay = curl(
        "-N", "-H", AUTH, "-H", "Last-Event-ID: 2", f"{url}/v1/sessions/{sid}/calls/c-count/events"
    )
    assert replay.status == 200
    assert sse(replay.body) == events[2:]


def test_curl_n_shows_progress_while_the_call_runs(url: str) -> None:
    """Each event reaches curl's stdout as it is sent: the first tick of a 30 s nap is read
    while the call is still running, and a cancel from a second curl ends the stream with the
    cancelled result."""
    sid = session(url)
    calls = f"{url}/v1/sessions/{sid}/calls"
    payload = json.dumps({"name": "nap", "arguments": {"seconds": 30}, "call_id": "c-nap"})
    with streaming("-H", AUTH, "-H", "Accept: text/event-stream", "--json", payload, calls) as proc:
        assert proc.stdout is not None
        seen: list[str] = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("event: progress"):
                break
        assert seen and seen[-1].startswith("event: progress"), seen
        running = curl("-H", AUTH, f"{calls}/c-nap").json()
        assert running["status"] == "running", running
        cancelled = curl("-H", AUTH, "-X", "DELETE", f"{calls}/c-nap")
        assert cancelled.status == 202 and cancelled.json() == {
            "call_id": "c-nap",
            "cancelled": True,
        }
        started = time.monotonic()
        rest = proc.stdout.read()
        assert proc.wait(30) == 0
        assert time.monotonic() - started < 25, "the stream ended with the cancel, not the nap"
    events = sse("".join(seen) + rest)
    assert events[-1]["event"] == "result"
    assert {e["event"] for e in events[:-1]} == {"progress"}
    assert events[-1]["data"]["error"]["kind"] == "cancelled"
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))


def test_the_bearer_token(url: str) -> None:
    missing = curl("-H", JSON, "-d", "{}", f"{url}/v1/sessions")
    assert missing.status == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json() == {"detail": "missing bearer token"}
    wrong = curl("-H", "Authorization: Bearer nope", "-H", JSON, "-d", "{}", f"{url}/v1/sessions")
    assert wrong.status == 401 and wrong.json() == {"detail": "wrong bearer token"}
    # curl's own flag for it sends the same header.
    whoami = curl("--oauth2-bearer", TOKEN, f"{url}/v1/whoami")
    assert whoami.status == 200 and whoami.json() == {"tenant": "default", "key_id": "token-1"}
    health = curl(f"{url}/healthz")
    assert health.status == 200 and health.json()["status"] == "ok"


@pytest.mark.parametrize(
    ("flags", "sent"),
    [
        ((), "`application/x-www-form-urlencoded`"),  # what ``curl -d`` sends
        (("-H", "Content-Type: text/plain"), "`text/plain`"),
        (("-H", "Content-Type:"), "no Content-Type"),  # curl drops the header
    ],
)
def test_a_body_not_sent_as_json_is_told_what_to_send(
    url: str, flags: tuple[str, ...], sent: str
) -> None:
    """``curl -d`` without a JSON Content-Type: one error saying to send JSON (not FastAPI's
    "Input should be a valid dictionary" about a body that is one), and nothing runs."""
    sid = session(url)
    body = json.dumps({"name": "say", "arguments": {"text": "form"}})
    for route, payload in ((f"/v1/sessions/{sid}/calls", body), ("/v1/sessions", "{}")):
        refused = curl("-H", AUTH, *flags, "-d", payload, f"{url}{route}")
        assert refused.status == 422, refused
        [error] = refused.json()["detail"]
        assert error["type"] == "content_type" and error["loc"] == ["header", "content-type"]
        assert "`Content-Type: application/json`" in error["msg"] and "--json" in error["msg"]
        assert error["msg"].endswith(f"got {sent}")
    assert SAY_RAN not in curl("-H", AUTH, f"{url}/metrics").body, "nothing ran"
    # With the header, the same bytes run.
    ran = curl("-H", AUTH, "-H", JSON, "-d", body, f"{url}/v1/sessions/{sid}/calls")
    assert ran.status == 200 and ran.json()["output"]["value"] == {"echoed": "form"}
    assert f"{SAY_RAN} 1.0" in curl("-H", AUTH, f"{url}/metrics").body


def test_parse_skips_a_100_continue() -> None:
    printed = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhi"
    assert parse(printed) == Answer(200, {"content-type": "text/plain"}, "hi")


def test_no_cors_preflight_is_granted(url: str) -> None:
    """A page of another origin may post JSON only after a preflight: none is granted."""
    preflight = curl(
        "-X", "OPTIONS",
        "-H", "Origin: http://page.example",
        "-H", "Access-Control-Request-Method: POST",
        "-H", "Access-Control-Request-Headers: content-type",
        f"{url}/v1/sessions",
    )  # fmt: skip
    assert preflight.status in (401, 405), preflight
    assert not [h for h in preflight.headers if h.startswith("access-control-")]
