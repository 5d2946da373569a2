"""DNS rebinding and open binds: a gateway on loopback answers only its loopback ``Host``
names, and a gateway beyond loopback does not start unless something authenticates callers.

The attack (issue 13.1): a page on ``rebind.attacker.example`` re-points its name at
127.0.0.1; the victim's browser then sends ``POST /v1/sessions`` and a ``bash`` call to the
open local gateway, with ``Host: rebind.attacker.example``.

A refused open bind is answered before anything is served, so those run in this process
(``tests/cli/in_process.py``); the binds that start are real ``toolhub serve`` processes."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.cli.in_process import run_cli
from tests.cli.test_cli_servers import wait_http
from tests.gateway.conftest import TOOLHUB
from toolhub.gateway import GatewaySettings
from toolhub.gateway.settings import UnsafeBind
from toolhub.http_guard import host_name, is_loopback
from toolhub.ports import free_port

pytestmark = pytest.mark.timeout(90)

ATTACKER = "rebind.attacker.example"


def test_a_rebound_host_is_refused_and_nothing_runs(open_gateway: tuple[str, Path]) -> None:
    url, workspace = open_gateway
    attack = {"Host": ATTACKER}
    with httpx.Client(base_url=url, timeout=30) as c:
        created = c.post("/v1/sessions", json={}, headers=attack)
        assert created.status_code == 421
        assert created.json() == {"detail": "Invalid Host header"}
        call = {"name": "bash", "arguments": {"command": "touch pwned", "description": "t"}}
        assert c.post("/v1/sessions/any/calls", json=call, headers=attack).status_code == 421
        assert c.get("/v1/sessions", headers={"Host": f"{ATTACKER}:80"}).status_code == 421
        # Probes answer whatever the Host (a kubelet probes by pod IP).
        assert c.get("/healthz", headers=attack).status_code == 200
        # The gateway's own names still work, with or without a port.
        for host in ("127.0.0.1", "localhost", f"localhost:{url.rsplit(':', 1)[1]}"):
            ok = c.post("/v1/sessions", json={}, headers={"Host": host})
            assert ok.status_code == 201, (host, ok.text)
        sid = ok.json()["session_id"]
        ran = c.post(f"/v1/sessions/{sid}/calls", json=call)
        assert ran.status_code == 200, ran.text
        assert ran.json().get("error") is None, ran.json()["error"]
    assert [p.name for p in workspace.iterdir()] == ["pwned"]  # only the legitimate call


def test_beyond_loopback_without_a_token_does_not_start(
    env: dict[str, str], tmp_path: Path
) -> None:
    port = str(free_port())
    refused = run_cli(
        ["serve", "--host", "0.0.0.0", "--port", port, "--workspace", str(tmp_path)], env, tmp_path
    )
    assert refused.returncode != 0
    assert "refusing to serve on 0.0.0.0 without a bearer token" in refused.stderr
    assert "TOOLHUB_BEHIND_AUTH_PROXY" in refused.stderr
    assert "Traceback" not in refused.stderr + refused.stdout


@pytest.mark.parametrize(
    "extra",
    [{"TOOLHUB_API_TOKEN": "tok-1"}, {"TOOLHUB_BEHIND_AUTH_PROXY": "1"}],
    ids=["token", "behind-proxy"],
)
def test_beyond_loopback_starts_with_a_token_or_a_proxy(
    env: dict[str, str], tmp_path: Path, extra: dict[str, str]
) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [TOOLHUB, "serve", "--host", "0.0.0.0", "--port", str(port), "--workspace", str(tmp_path)],
        env={**env, **extra},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        # Beyond loopback the names are unknown: any Host, the token (or proxy) is the guard.
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", headers={"Host": "toolhub.example"})
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_configured_hosts_replace_the_default(tmp_path: Path) -> None:
    settings = GatewaySettings(workspace=tmp_path, allowed_hosts=frozenset({"tools.internal"}))
    assert settings.bound_to("127.0.0.1").allowed_hosts == {"tools.internal"}
    assert GatewaySettings(workspace=tmp_path).bound_to("::1").allowed_hosts == {
        "localhost",
        "127.0.0.1",
        "::1",
    }
    with pytest.raises(UnsafeBind):
        GatewaySettings(workspace=tmp_path).bound_to("10.0.0.5")
    assert (
        GatewaySettings(workspace=tmp_path, api_token="t").bound_to("10.0.0.5").allowed_hosts
        is None
    )


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("LocalHost:8000", "localhost"),
        ("[::1]:8000", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("", ""),
        ("a.example:1:2", "a.example:1:2"),
    ],
)
def test_host_names(header: str, name: str) -> None:
    assert host_name(header) == name


def test_loopback_addresses() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.1", "example.com"]))


def test_the_mcp_http_server_beyond_loopback_without_a_token_does_not_start(
    env: dict[str, str], tmp_path: Path
) -> None:
    refused = run_cli(
        ["mcp", "--transport", "http", "--host", "0.0.0.0", "--workspace", str(tmp_path)],
        env,
        tmp_path,
    )
    assert refused.returncode != 0
    assert "refusing to serve on 0.0.0.0 without a bearer token" in refused.stderr
    assert "Traceback" not in refused.stderr + refused.stdout
