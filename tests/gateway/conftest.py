"""A real gateway over HTTP: uvicorn on a free port in a background thread, embedded sessions on
the test tools. ``gateway_url`` starts one per test; ``make_gateway`` takes settings overrides;
``open_gateway`` is ``toolhub serve`` in its own process, on the real catalog, for what the
test process's own threads and heap must not blur (timings of the gateway's event loop)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.test_cli_servers import wait_http
from tests.gateway.support import session_factory
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.ports import free_port

MakeGateway = Callable[..., str]
TOOLHUB = str(Path(sys.executable).with_name("toolhub"))


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


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    return {**environ, "TOOLHUB_HOME": str(tmp_path / "home")}


@pytest.fixture
def open_gateway(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``toolhub serve`` as a user starts it: loopback, no token."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [TOOLHUB, "serve", "--port", str(port), "--workspace", str(workspace)],
        env=env,
        cwd=workspace,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        yield url, workspace
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
