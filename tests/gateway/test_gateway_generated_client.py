"""A client nobody here wrote: openapi-python-client 0.29.1 generates a Python package from the
gateway's own ``/openapi.json``, and that package drives a real gateway (bearer auth on). This is
what the OpenAPI document is for: if a route's schema, a status code or the declared security
were wrong, the generated code would not parse the answers, or would not send the token.

The generator has heavy dependencies of its own, so it lives in its own cached virtualenv
(``.venv/clients/openapi``); a registry that cannot be reached fails the test. The call's event
stream is read with httpx-sse over the generated client's own httpx client.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse

from tests.client_venvs import client_python
from tests.gateway.conftest import MakeGateway

#: The third-party clients these tests run (built in the background: tests/conftest.py).
NEEDS_CLIENTS = ("openapi",)

pytestmark = pytest.mark.timeout(600)

PACKAGE = "toolhub_gateway_client"  # from the spec's title, "toolhub gateway"
TOKEN = "s3cret-token"


@pytest.fixture
def gateway(make_gateway: MakeGateway) -> str:
    return make_gateway(api_token=TOKEN)


@pytest.fixture
def gen(tmp_path: Path, gateway: str) -> Iterator[Any]:
    """The generated package, generated from the running gateway's spec and imported."""
    spec = httpx.get(f"{gateway}/openapi.json", timeout=20)  # public: no token
    assert spec.status_code == 200, spec.text
    (tmp_path / "openapi.json").write_text(spec.text)
    python = client_python("openapi")
    out = tmp_path / "generated"
    out.mkdir()
    generator = str(python.with_name("openapi-python-client"))
    done = subprocess.run(
        [generator, "generate", "--meta", "none", "--path", str(tmp_path / "openapi.json")],
        cwd=out,
        # Its venv's bin on PATH: the post-generation hooks run that venv's ruff.
        env={**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    # The spec generates cleanly: no schema the generator had to skip or guess at.
    assert "Warning" not in done.stdout and "Error" not in done.stdout, done.stdout
    assert (out / PACKAGE / "client.py").is_file(), sorted(p.name for p in out.iterdir())
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def _api(name: str) -> Any:
    """A generated endpoint module (FastAPI's default operation ids name them)."""
    return importlib.import_module(f"{PACKAGE}.api.default.{name}")


def _model(name: str) -> Any:
    return getattr(importlib.import_module(f"{PACKAGE}.models"), name)


def _events(http: httpx.Client, url: str, **headers: str) -> list[ServerSentEvent]:
    with connect_sse(http, "GET", url, headers=headers) as source:
        assert source.response.status_code == 200, source.response.read()
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return list(source.iter_sse())


def test_generated_client_creates_lists_calls_and_streams(gen: Any, gateway: str) -> None:
    client = gen.AuthenticatedClient(
        base_url=gateway, token=TOKEN, raise_on_unexpected_status=True, timeout=httpx.Timeout(30)
    )
    sessions = _api("create_session_v1_sessions_post")
    created = sessions.sync_detailed(client=client, body=_model("CreateSession")())
    assert created.status_code == 201, created.content
    session = created.parsed
    assert isinstance(session, _model("SessionCreated")), session
    assert session.created is True and session.tools == 4 and session.warnings == []
    sid = session.session_id

    again = sessions.sync_detailed(client=client, body=_model("CreateSession")(session_id=sid))
    assert again.status_code == 200 and again.parsed.created is False  # the documented 200

    tools = _api("tool_definitions_v1_sessions_session_id_tools_get")
    listed = tools.sync(sid, client=client)
    assert [t["function"]["name"] for t in listed] == ["echo", "count", "nap", "ask"]
    mcp_format = _model("ToolDefinitionsV1SessionsSessionIdToolsGetFormat").MCP
    as_mcp = tools.sync(sid, client=client, format_=mcp_format, strict=True)
    echo = next(t for t in as_mcp if t["name"] == "echo")
    schema = echo["inputSchema"]
    assert "text" in schema["properties"] and schema["required"] == list(schema["properties"])

    calls = _api("call_tool_v1_sessions_session_id_calls_post")
    arguments = _model("CallRequestArgumentsType0").from_dict({"n": 4, "delay": 0.01})
    body = _model("CallRequest")(name="count", arguments=arguments, call_id="c-gen")
    result = calls.sync(sid, client=client, body=body)
    assert isinstance(result, _model("CallResultBody")), result
    assert result.is_error is False and result.call_id == "c-gen"
    assert result.tool_id == "Main:count"
    assert result.output.value == {"total": 4}
    assert "4" in result.prompt_text

    bad = calls.sync(sid, client=client, body=_model("CallRequest")(name="echo", arguments="{}"))
    assert bad.is_error is True and bad.error.kind, bad  # a model-readable error, not a 4xx
    assert "text" in bad.prompt_text

    record = _api("call_record_v1_sessions_session_id_calls_call_id_get")
    recorded = record.sync_detailed(sid, "c-gen", client=client)
    assert recorded.status_code == 200
    assert json.loads(recorded.content)["call_id"] == "c-gen"
    missing = record.sync_detailed(sid, "no-such-call", client=client)
    assert missing.status_code == 404 and "no-such-call" in missing.parsed.detail

    # The event stream, over the generated client's httpx client (its base URL and token).
    http = client.get_httpx_client()
    events_url = f"/v1/sessions/{sid}/calls/c-gen/events"
    events = _events(http, events_url)
    assert [e.event for e in events] == ["progress"] * 4 + ["result"]
    assert [int(e.id) for e in events] == [1, 2, 3, 4, 5]
    assert "step 0" in events[0].data
    final = events[-1].json()
    assert final["output"]["value"] == {"total": 4} and final["is_error"] is False
    assert _model("CallResultBody").from_dict(final).call_id == "c-gen"
    resumed = _events(http, events_url, **{"Last-Event-ID": "3"})
    assert [int(e.id) for e in resumed] == [4, 5]
    assert [e.data for e in resumed] == [e.data for e in events[3:]]

    deleted = _api("delete_session_v1_sessions_session_id_delete").sync_detailed(sid, client=client)
    assert deleted.status_code == 204
    assert tools.sync_detailed(sid, client=client).status_code == 404


def test_generated_client_is_refused_without_the_token(gen: Any, gateway: str) -> None:
    sessions = _api("create_session_v1_sessions_post")
    body = _model("CreateSession")()
    for client in (
        gen.AuthenticatedClient(base_url=gateway, token="wrong"),
        gen.Client(base_url=gateway),
    ):
        refused = sessions.sync_detailed(client=client, body=body)
        assert refused.status_code == 401, refused.content
        assert isinstance(refused.parsed, _model("Problem")), refused.parsed
        assert refused.parsed.detail
    health = _api("healthz_healthz_get").sync(client=gen.Client(base_url=gateway))
    assert health.status == "ok"  # a public route: no token needed
