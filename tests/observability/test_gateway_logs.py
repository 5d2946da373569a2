"""Gateway logs: a call started through the gateway names itself on every line logged while it
runs (even from the tool's own code), and ``toolhub serve`` in JSON mode writes JSON lines only,
uvicorn's access log included (which it writes only when asked)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from pydantic import BaseModel

from tests.distributed.helpers import wait_until
from tests.fixtures_stack import free_port
from toolhub import Session, Tool, ToolContext, ToolKind
from toolhub.gateway.calls import Calls
from toolhub.gateway.metrics import Metrics
from toolhub.logs import CallContextFilter, JsonFormatter
from toolhub.toolset import ToolSetBuilder

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))


class NoArgs(BaseModel):
    pass


class Done(BaseModel):
    ok: bool


class Chatty(Tool[NoArgs, Done]):
    """Logs from inside the tool, where no call id is at hand."""

    id = "chatty"
    namespace = "Obs"
    kind = ToolKind.OTHER
    read_only = True
    description_template = "Log a line."

    def run(self, ctx: ToolContext, args: NoArgs) -> Done:
        logging.getLogger("tests.observability.chatty").warning("inside the tool")
        return Done(ok=True)


def test_gateway_calls_name_themselves_in_log_lines(tmp_path: Path):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(CallContextFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.observability.chatty")
    logger.addHandler(handler)
    builder = ToolSetBuilder(plugins=False).register(Chatty)
    session = Session.embedded({"tools": [{"id": "Obs:chatty"}]}, tmp_path, builder=builder)

    async def go() -> None:
        calls = Calls(Metrics())
        logs = [calls.start(session, "chatty", {}, call_id=f"gw-{i}") for i in range(3)]
        for log in logs:
            await log.result()

    try:
        asyncio.run(asyncio.wait_for(go(), 10))
    finally:
        logger.removeHandler(handler)
        session.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert sorted(line["call_id"] for line in lines) == ["gw-0", "gw-1", "gw-2"]
    assert {(line["session_id"], line["tool"]) for line in lines} == {
        (session.session_id, "chatty")
    }


def _serve_one_request(tmp_path: Path, *flags: str, **env_vars: str) -> str:
    """Everything ``toolhub serve`` wrote while it created one session."""
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env.update(TOOLHUB_HOME=str(tmp_path / "home"), **env_vars)
    proc = subprocess.Popen(
        [TOOLHUB, "serve", "--port", str(port), "--workspace", str(tmp_path), *flags],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None

    try:
        wait_until(up, 30, 0.1)
        assert httpx.post(f"{url}/v1/sessions", json={}, timeout=10).status_code == 201
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    return out + err


def test_serve_logs_requests_only_when_asked(tmp_path: Path):
    quiet = _serve_one_request(tmp_path)
    assert "toolhub gateway on " in quiet
    assert "POST /v1/sessions" not in quiet
    by_env = _serve_one_request(tmp_path, TOOLHUB_ACCESS_LOG="1")
    assert '"POST /v1/sessions HTTP/1.1" 201' in by_env, by_env


def test_serve_in_json_mode_writes_json_lines(tmp_path: Path):
    output = _serve_one_request(tmp_path, "--access-log", TOOLHUB_LOG_FORMAT="json")
    # The CLI's one-line banner (rich, before logging starts) aside, everything is JSON.
    lines = [line for line in output.splitlines() if line.strip()]
    banner = [line for line in lines if line.startswith("toolhub gateway on ")]
    records = [json.loads(line) for line in lines if line not in banner]
    assert len(banner) == 1
    assert any(
        r["logger"] == "uvicorn.access" and "POST /v1/sessions" in r["message"] for r in records
    )
    assert any(r["logger"] == "uvicorn.error" for r in records)
    assert all({"ts", "level", "logger", "message"} <= set(r) for r in records)
