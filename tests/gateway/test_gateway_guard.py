"""Auth on and off, body limits (declared and chunked), malformed bodies, and external tools
registered over HTTP whose calls the gateway forwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.gateway.conftest import MakeGateway
from toolhub.gateway import ThreadedServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def client(make_gateway: MakeGateway) -> Iterator[httpx.Client]:
    """A gateway whose forwarded tools may target loopback, as one bound to loopback is
    (``GatewaySettings.bound_to``): the forward targets here are local test servers."""
    with httpx.Client(base_url=make_gateway(forward_private=True), timeout=20) as c:
        yield c


@pytest.fixture
def sid(client: httpx.Client) -> str:
    return str(client.post("/v1/sessions", json={}).json()["session_id"])


def test_bearer_token(make_gateway: MakeGateway) -> None:
    url = make_gateway(api_token="s3cret")
    with httpx.Client(base_url=url) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 200
        assert c.get("/openapi.json").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            denied = c.post("/v1/sessions", json={}, headers=headers)
            assert denied.status_code == 401
            assert denied.headers["www-authenticate"] == "Bearer"
        assert c.get("/metrics").status_code == 401
        ok = c.post("/v1/sessions", json={}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 201


def test_several_tokens_one_per_client(make_gateway: MakeGateway) -> None:
    url = make_gateway(api_token="token-alice, token-bob")
    with httpx.Client(base_url=url) as c:
        for token, status in (("token-alice", 201), ("token-bob", 201), ("token-eve", 401)):
            answer = c.post("/v1/sessions", json={}, headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == status, token
        whole = c.post("/v1/sessions", json={}, headers={"Authorization": "Bearer token-alice,"})
        assert whole.status_code == 401  # the list itself is no token


def test_no_token_means_open(client: httpx.Client) -> None:
    assert client.post("/v1/sessions", json={}).status_code == 201


def test_oversized_bodies_are_refused(make_gateway: MakeGateway) -> None:
    url = make_gateway(max_body_bytes=1024)
    big = {"name": "echo", "arguments": {"text": "x" * 4096}}
    with httpx.Client(base_url=url) as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        declared = c.post(f"/v1/sessions/{sid}/calls", json=big)
        assert declared.status_code == 413

        def chunks() -> Iterator[bytes]:
            yield b'{"name": "echo", "arguments": {"text": "'
            for _ in range(64):
                yield b"y" * 64
            yield b'"}}'

        chunked = c.post(
            f"/v1/sessions/{sid}/calls",
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        assert chunked.status_code == 413
        small = c.post(
            f"/v1/sessions/{sid}/calls", json={"name": "echo", "arguments": {"text": "s"}}
        )
        assert small.status_code == 200


@pytest.mark.parametrize(
    "body",
    [b"{", b"[]", b'{"name": 3}', b'{"arguments": {}}', b'{"name": "echo", "extra": 1}', b"\xff"],
)
def test_malformed_call_bodies(client: httpx.Client, sid: str, body: bytes) -> None:
    response = client.post(
        f"/v1/sessions/{sid}/calls", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code in {400, 422}, "malformed, not a server error"


@pytest.fixture
def target() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A forward target: adds two numbers, fails on demand, records what it received."""
    received: list[dict[str, Any]] = []
    app = FastAPI()

    @app.post("/add")
    async def add(request: Request) -> Any:
        body = await request.json()
        received.append({"body": body, "auth": request.headers.get("x-key")})
        args = body["arguments"]
        if args.get("fail"):
            return JSONResponse({"detail": "nope"}, status_code=500)
        return {"sum": args["a"] + args["b"]}

    with ThreadedServer(app) as server:
        yield server.url, received


def test_external_tool_forwarded_over_http(
    client: httpx.Client, sid: str, target: tuple[str, list[dict[str, Any]]]
) -> None:
    url, received = target
    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    body = {
        "description": "Add two numbers.",
        "input_schema": schema,
        "forward": {"url": f"{url}/add", "headers": {"x-key": "k1"}},
    }
    put = client.put(f"/v1/sessions/{sid}/external-tools/math__add", json=body)
    assert put.status_code == 200, put.text
    tools = client.get(f"/v1/sessions/{sid}/tools", params={"format": "anthropic"}).json()
    assert {"name": "math__add", "description": "Add two numbers.", "input_schema": schema} in tools

    call = client.post(
        f"/v1/sessions/{sid}/calls",
        json={"name": "math__add", "arguments": {"a": 2, "b": 3}, "call_id": "c-ext"},
    ).json()
    assert call["output"]["value"] == {"sum": 5} and call["tool_id"] == "External:math__add"
    assert received[0] == {
        "body": {
            "name": "math__add",
            "arguments": {"a": 2, "b": 3},
            "call_id": "c-ext",
            "session_id": sid,
        },
        "auth": "k1",
    }
    failed = client.post(
        f"/v1/sessions/{sid}/calls", json={"name": "math__add", "arguments": {"fail": True}}
    ).json()
    assert failed["is_error"] and "(500)" in failed["error"]["detail"]

    assert client.delete(f"/v1/sessions/{sid}/external-tools/math__add").status_code == 204
    assert client.delete(f"/v1/sessions/{sid}/external-tools/math__add").status_code == 404
    gone = client.post(f"/v1/sessions/{sid}/calls", json={"name": "math__add"}).json()
    assert gone["error"]["kind"] == "not_found"


def test_external_tool_names_and_modes(client: httpx.Client, sid: str) -> None:
    body = {"forward": {"url": "http://127.0.0.1:9/x"}}
    assert client.put(f"/v1/sessions/{sid}/external-tools/echo", json=body).status_code == 409
    assert client.put(f"/v1/sessions/{sid}/external-tools/plain", json=body).status_code == 422
    assert client.put(f"/v1/sessions/{sid}/external-tools/a__b__c", json=body).status_code == 422
    bad_url = {"forward": {"url": "file:///etc/passwd"}}
    assert client.put(f"/v1/sessions/{sid}/external-tools/a__b", json=bad_url).status_code == 422
    read_only = client.post("/v1/sessions", json={"config": {"mode": "read_only"}}).json()
    refused = client.put(f"/v1/sessions/{read_only['session_id']}/external-tools/a__b", json=body)
    assert refused.status_code == 409
    unreachable = client.put(f"/v1/sessions/{sid}/external-tools/dead__tool", json=body)
    assert unreachable.status_code == 200
    result = client.post(f"/v1/sessions/{sid}/calls", json={"name": "dead__tool"}).json()
    assert result["is_error"] and "unreachable" in result["error"]["detail"]


@pytest.mark.parametrize(
    ("url", "private_ok"),
    [
        ("http://169.254.169.254/latest/meta-data/", True),  # cloud metadata: always refused
        ("http://[fd00:ec2::254]/latest/", True),
        ("http://127.0.0.1:9/x", False),
        ("http://localhost:9/x", False),
        ("http://10.1.2.3/x", False),
        ("http://[::ffff:127.0.0.1]:9/x", False),
        ("http://user:pw@example.com/x", True),
    ],
)
def test_forward_targets_pass_the_network_guard(
    make_gateway: MakeGateway, url: str, private_ok: bool
) -> None:
    """SSRF through a forwarded tool (issue 13.8): a client may not make the gateway POST to
    the metadata service, or to local and private addresses unless the gateway allows them."""
    with httpx.Client(base_url=make_gateway(forward_private=private_ok), timeout=20) as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        put = c.put(f"/v1/sessions/{sid}/external-tools/x__y", json={"forward": {"url": url}})
        assert put.status_code == 422, put.text
        assert "forward URL refused" in put.json()["detail"]
        names = {t["name"] for t in c.get(f"/v1/sessions/{sid}/tools?format=mcp").json()}
        assert "x__y" not in names
