"""``toolhub serve`` and ``toolhub mcp`` as subprocesses, with the built-in tools: what a user
gets from the command line, exit codes included. Refused options are answered before anything
is served, so those run in this process (``tests/cli/in_process.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.cli.in_process import run_cli
from toolhub.ports import free_port

pytestmark = pytest.mark.timeout(90)

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No TOOLHUB_* setting of this process (other suites export some), a private home."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    return {**environ, "TOOLHUB_HOME": str(tmp_path / "home")}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "hello.txt").write_text("hello from the cli\n")
    return path


def wait_http(url: str, proc: subprocess.Popen[Any], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, "server exited early"
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} not up"
        time.sleep(0.1)


@pytest.fixture
def serve(env: dict[str, str], workspace: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    proc = subprocess.Popen(
        [TOOLHUB, "serve", "--port", str(port), "--workspace", str(workspace)],
        env={**env, "TOOLHUB_API_TOKEN": "cli-token"},
        cwd=workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)


def test_serve_answers_calls_and_stops_on_sigterm(
    serve: tuple[str, subprocess.Popen[str]],
) -> None:
    url, proc = serve
    auth = {"Authorization": "Bearer cli-token"}
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/v1/sessions", json={}).status_code == 401
        sid = client.post("/v1/sessions", json={}, headers=auth).json()["session_id"]
        result = client.post(
            f"/v1/sessions/{sid}/calls",
            json={"name": "read_file", "arguments": {"path": "hello.txt"}},
            headers=auth,
        ).json()
        assert "hello from the cli" in result["prompt_text"]
        tools = client.get(f"/v1/sessions/{sid}/tools", headers=auth).json()
        assert {"bash", "read_file", "edit_file", "ask_user"} <= {
            t["function"]["name"] for t in tools
        }
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode in {0, -signal.SIGTERM}, "graceful shutdown (uvicorn re-raises TERM)"
    assert "toolhub gateway on http://127.0.0.1" in err and "bearer token" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--port", "0"], "--port must be 1-65535"),
        (["serve", "--config", "missing.yaml"], "does not exist"),
        (["mcp", "--transport", "carrier-pigeon"], "carrier-pigeon"),
        (["up", "--port", "70000"], "--port must be 1-65535"),
    ],
)
def test_bad_options_fail_on_stderr(
    args: list[str], message: str, env: dict[str, str], workspace: Path
) -> None:
    done = run_cli(args, env, workspace)
    assert done.returncode != 0
    assert message in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", ["serve", "up"])
def test_a_server_refuses_to_start_with_an_invalid_config(
    command: str, env: dict[str, str], workspace: Path
) -> None:
    """Before, both started and answered 422 to every session; now they list what is wrong and
    exit 1 before starting anything."""
    (workspace / "bad.yaml").write_text("tools:\n  - id: Main:nope\n")
    done = run_cli([command, "--config", "bad.yaml", "--port", "18999"], env, workspace)
    assert done.returncode == 1, done.stderr
    assert "configuration violations" in done.stderr and "Main:nope" in done.stderr
    assert "gateway on" not in done.stderr and done.stdout == ""


def _mcp_checks(session: ClientSession, marker_dir: Path) -> Any:
    async def checks() -> None:
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"bash", "read_file", "task_output", "ask_user"} <= names

        read = await session.call_tool("read_file", {"path": "hello.txt"})
        assert "hello from the cli" in read.content[0].text and not read.is_error

        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        command = "for i in 1 2 3 4; do echo line $i; sleep 0.15; done"
        ran = await session.call_tool(
            "bash", {"command": command, "description": "count"}, progress_callback=on_progress
        )
        assert "line 4" in ran.content[0].text
        assert seen and seen == sorted(seen)

        marker = marker_dir / "never"
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                session.call_tool,
                "bash",
                {"command": f"sleep 47.25 && touch {marker}", "description": "runaway"},
            )
            await anyio.sleep(1.0)
            tg.cancel_scope.cancel()
        after = await session.call_tool("bash", {"command": "echo ok", "description": "alive"})
        assert "ok" in after.content[0].text

    return checks


def test_mcp_over_stdio(env: dict[str, str], workspace: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(command=TOOLHUB, args=["mcp"], env=env, cwd=workspace)

    async def body() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _mcp_checks(session, tmp_path)()

    anyio.run(body)
    assert not (tmp_path / "never").exists()
    assert not _sleepers("sleep 47.25"), "the cancelled command's process is gone"


def test_mcp_over_http(env: dict[str, str], workspace: Path, tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [TOOLHUB, "mcp", "--transport", "http", "--port", str(port)],
        env=env,
        cwd=workspace,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_http(url, proc)

        async def body() -> None:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await _mcp_checks(session, tmp_path)()

        anyio.run(body)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert not _sleepers("sleep 47.25")


def _sleepers(cmdline: str) -> list[int]:
    """Processes of this test run still running ``cmdline`` (after a short grace)."""
    deadline = time.monotonic() + 30
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    text = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if text.strip() == cmdline:
                    found.append(int(entry.name))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
