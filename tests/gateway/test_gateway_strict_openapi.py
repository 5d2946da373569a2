"""Issue 14 over HTTP: strict definitions from the tools route, and an OpenAPI document that
declares the bearer auth ``Guard`` enforces (so generated clients send the token)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.gateway.conftest import MakeGateway
from toolhub.gateway.client import GatewayClient
from toolhub.http_guard import PUBLIC_PATHS

pytestmark = pytest.mark.timeout(60)


def test_tools_route_serves_strict_definitions(
    client: httpx.Client, sid: str, gateway_url: str
) -> None:
    tools = f"/v1/sessions/{sid}/tools"
    loose = client.get(tools).json()
    assert all("strict" not in t["function"] for t in loose)
    assert all(t["function"]["parameters"]["additionalProperties"] is False for t in loose)
    strict = client.get(tools, params={"strict": "true"}).json()
    assert [t["function"]["name"] for t in strict] == [t["function"]["name"] for t in loose]
    for tool in strict:
        function = tool["function"]
        assert function["strict"] is True
        assert function["parameters"]["required"] == list(function["parameters"]["properties"])
    mcp = client.get(tools, params={"format": "mcp", "strict": "true"}).json()
    assert [t["inputSchema"] for t in mcp] == [t["function"]["parameters"] for t in strict]
    refused = client.get(tools, params={"format": "anthropic", "strict": "true"})
    assert refused.status_code == 422 and "strict" in refused.json()["detail"]
    with GatewayClient(gateway_url) as remote:
        assert remote.tools(sid, strict=True) == strict


def _operations(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (path, method): operation
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
    }


def test_openapi_declares_bearer_auth_on_protected_routes(make_gateway: MakeGateway) -> None:
    url = make_gateway(api_token="s3cret")
    spec = httpx.get(f"{url}/openapi.json").json()  # public: no token needed to read it
    assert spec["components"]["securitySchemes"]["bearer"]["type"] == "http"
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    operations = _operations(spec)
    assert ("/v1/sessions/{session_id}/tools", "get") in operations
    for (path, _method), operation in operations.items():
        if path in PUBLIC_PATHS:
            assert "security" not in operation, path
        else:
            assert operation["security"] == [{"bearer": []}], path
    public = {path for path, _ in operations if path in PUBLIC_PATHS}
    assert public == {"/healthz", "/readyz"}
    assert httpx.get(f"{url}/metrics").status_code == 401


def test_without_a_token_the_bearer_is_optional(gateway_url: str) -> None:
    spec = httpx.get(f"{gateway_url}/openapi.json").json()
    security = _operations(spec)[("/v1/sessions", "post")]["security"]
    assert security == [{"bearer": []}, {}]
    assert "security" not in _operations(spec)[("/healthz", "get")]
