"""Secrets never reach warnings, logs or a command's environment (issue 13.6): values expanded
from ``${VAR}`` references show as the reference, credential query parameters are masked in
the access log, and toolhub's own credentials are not in an embedded command's environment."""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli_servers import wait_http
from toolhub import Session
from toolhub.logs import JsonFormatter, guard_handler
from toolhub.ports import free_port
from toolhub.redaction import redact, redact_query, remember

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
HUB_SECRET = "hub-SECRET-7f3a9c"
MCP_SECRET = "mcp-SECRET-2b8e41"


def test_a_hub_and_an_mcp_server_that_fail_show_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUB_T", HUB_SECRET)
    monkeypatch.setenv("MCP_T", MCP_SECRET)
    closed = free_port()
    config = {
        "hubs": {"far": {"url": f"http://127.0.0.1:{closed}/?t=${{HUB_T}}", "token": "${HUB_T}"}},
        "mcp_servers": {
            "remote": {
                "url": f"http://127.0.0.1:{closed}/mcp?key=${{MCP_T}}",
                "headers": {"Authorization": "Bearer ${MCP_T}"},
            }
        },
    }
    # A handler as toolhub's processes set them up, at DEBUG: httpx and the MCP SDK log URLs.
    written = io.StringIO()
    handler = guard_handler(logging.StreamHandler(written))
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level, root.level = root.level, logging.DEBUG
    try:
        with Session.embedded(config, tmp_path) as session:
            warnings = "\n".join(session.warnings)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert "far" in warnings and "remote" in warnings, warnings
    assert "${HUB_T}" in warnings
    assert "127.0.0.1" in written.getvalue(), "the URLs were logged, masked"
    for secret in (HUB_SECRET, MCP_SECRET):
        assert secret not in warnings
        assert secret not in written.getvalue()


def test_redaction_rules() -> None:
    remember("SOME_TOKEN", "abcdef123456")
    remember("SHORT", "abc")  # too short to mask without garbling text
    assert redact("GET /x?q=1&t=abcdef123456 abc") == "GET /x?q=1&t=${SOME_TOKEN} abc"
    assert redact_query("/v1/sessions?token=zz&access_token=yy&page=2&apiKey=k") == (
        "/v1/sessions?token=***&access_token=***&page=2&apiKey=***"
    )
    assert redact_query("/a?x-signature=s1&name=bob") == "/a?x-signature=***&name=bob"


def test_the_access_log_masks_a_query_token(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env.update(TOOLHUB_HOME=str(tmp_path / "home"), TOOLHUB_API_TOKEN="right-token-5521")
    port = free_port()
    proc = subprocess.Popen(
        [TOOLHUB, "serve", "--port", str(port), "--workspace", str(tmp_path), "--access-log"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/healthz", proc)
        refused = httpx.post(f"{url}/v1/sessions?token=leaked-QUERY-9931", json={})
        assert refused.status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    logs = out + err
    assert "/v1/sessions?token=***" in logs, logs
    assert "leaked-QUERY-9931" not in logs


def test_an_embedded_command_does_not_see_toolhubs_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_API_TOKEN", "api-SECRET-6d1f")
    monkeypatch.setenv("REDIS_PASSWORD", "redis-SECRET-0a4c")
    monkeypatch.setenv("PLAIN_SETTING", "visible-1234")
    with Session.embedded(None, tmp_path) as session:
        result = session.call_sync("bash", {"command": "env", "description": "print env"})
    assert result.error is None, result.error
    assert "visible-1234" in result.prompt_text
    assert "api-SECRET-6d1f" not in result.prompt_text
    assert "redis-SECRET-0a4c" not in result.prompt_text
