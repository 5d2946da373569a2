"""A real gateway over HTTP: uvicorn on a free port in a background thread, embedded sessions on
the test tools. ``gateway_url`` starts one per test; ``make_gateway`` takes settings overrides."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.support import session_factory
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app

MakeGateway = Callable[..., str]


@pytest.fixture
def make_gateway(tmp_path: Path) -> Iterator[MakeGateway]:
    servers: list[ThreadedServer] = []
    root = tmp_path / "root"
    root.mkdir()

    def make(**overrides: Any) -> str:
        settings = replace(GatewaySettings(workspace=root, keepalive_s=0.5), **overrides)
        app = create_app(settings, factory=session_factory(tmp_path))
        server = ThreadedServer(app).start()
        servers.append(server)
        return server.url

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def gateway_url(make_gateway: MakeGateway) -> str:
    return make_gateway()


@pytest.fixture
def client(gateway_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway_url, timeout=20) as c:
        yield c


@pytest.fixture
def sid(client: httpx.Client) -> str:
    response = client.post("/v1/sessions", json={})
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])
