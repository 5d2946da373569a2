"""Property-based fuzz of the gateway's OpenAPI schema (schemathesis): whatever a client sends
within or outside the schema, the gateway never answers 5xx and its statuses are documented.

Path parameters are steered at a real session most of the time, so the fuzzer reaches the
call, answer and external-tool handlers instead of stopping at 404."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from tests.gateway.support import make_builder
from toolhub import Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.toolset import ConfigSource

SESSION = "fuzz"
#: Cases per operation and mode: 8 in `make test`, 20 in `make test-long` (the same
#: derandomized stream, longer).
EXAMPLES = int(os.environ.get("TOOLHUB_FUZZ_EXAMPLES", "8"))
SAFE_TOOLS = {"tools": [{"id": "Main:echo"}]}


def _factory(tmp: Path) -> Any:
    builder = make_builder()

    def make(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        # A fuzzed config never starts processes: MCP servers and hubs are dropped.
        if isinstance(config, dict):
            config = {k: v for k, v in config.items() if k not in {"mcp_servers", "hubs"}}
        return Session.embedded(
            config, workspace, session_id=session_id, state_dir=tmp / session_id, builder=builder
        )

    return make


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("fuzz")
    app = create_app(
        GatewaySettings(workspace=tmp, keepalive_s=0.2, max_body_bytes=64 * 1024),
        factory=_factory(tmp),
    )
    with ThreadedServer(app) as server:
        import httpx

        httpx.post(f"{server.url}/v1/sessions", json={"session_id": SESSION, "config": SAFE_TOOLS})
        yield schemathesis.openapi.from_url(f"{server.url}/openapi.json")


@pytest.mark.timeout(240)
def test_gateway_never_answers_5xx(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 12
    for operation, mode in itertools.product(operations, GenerationMode):

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def fuzz(case: Any) -> None:
            params = case.path_parameters or {}
            if "session_id" in params and hash(repr(case.body)) % 4 != 0:
                params["session_id"] = SESSION
            case.call_and_validate(checks=[not_a_server_error, status_code_conformance], timeout=10)

        try:
            fuzz()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid input at all"
