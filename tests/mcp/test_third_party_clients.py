"""Third-party MCP clients that nobody in this project wrote, run as their users run them, against
``toolhub mcp`` on stdio and on streamable HTTP (a real ``toolhub mcp --transport http``):

- langchain-mcp-adapters 0.3.2 needs ``mcp<2`` (it imports ``mcp.server.fastmcp``, gone in the
  project's mcp 2.3), so it runs in its own virtualenv as a separate client process
  (langchain_mcp_client.py beside this file) and prints what its ToolMessages say;
- the MCP Inspector CLI 2.12 (node), installed once with npm under ``.venv/clients``.

Both caches are made on first use and reused. A registry that cannot be reached fails the test
(the client is what it is about); only a machine without node/npm skips the Inspector.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client_venvs import client_python, inspector_launcher
from tests.http_process import serving
from tests.mcp.stdio_support import ROOT, TOOLHUB, toolhub_args, toolhub_env
from toolhub.ports import free_port

#: The third-party clients these tests run (built in the background: tests/conftest.py).
NEEDS_CLIENTS = ("langchain-mcp", "inspector")

pytestmark = pytest.mark.timeout(600)

LANGCHAIN_CLIENT = Path(__file__).with_name("langchain_mcp_client.py")
TOKEN = "tok"
#: A few of toolhub's built-in tools, by the names it serves them under.
NAMES = {"read_file", "write_file", "edit_file", "grep", "glob", "bash", "task_output"}
HELLO = "hello from a third-party client"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "hello.txt").write_text(HELLO + "\n")
    return path


@pytest.fixture
def http_url(tmp_path: Path, workspace: Path) -> Iterator[str]:
    """A real ``toolhub mcp --transport http`` with bearer auth; its ``/mcp`` URL."""
    port = free_port()
    with serving(
        [TOOLHUB, *toolhub_args(workspace, "--transport", "http", "--port", str(port))],
        f"http://127.0.0.1:{port}/mcp",
        env={**toolhub_env(tmp_path), "TOOLHUB_API_TOKEN": TOKEN},
        cwd=workspace,
        ready=lambda answer: answer.status_code == 401,  # up, and guarded
    ) as url:
        yield url


# -- langchain-mcp-adapters --------------------------------------------------------------------


def _langchain(connection: dict[str, Any]) -> dict[str, Any]:
    python = client_python("langchain-mcp")
    done = subprocess.run(
        [str(python), str(LANGCHAIN_CLIENT), json.dumps(connection)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _assert_langchain_saw(seen: dict[str, Any], workspace: Path) -> None:
    assert set(seen["names"]) >= NAMES, seen["names"]
    assert set(seen["read_file_schema"]) >= {"path", "offset", "limit"}
    assert seen["read"]["status"] == "success"
    assert seen["read"]["content"].endswith(f"1→{HELLO}"), seen["read"]
    # An isError result: a failed ToolMessage the model reads and can recover from, no crash.
    assert seen["outside"]["status"] == "error", seen["outside"]
    assert "outside the workspace" in seen["outside"]["content"]
    assert str(workspace) in seen["outside"]["content"]
    assert seen["background"]["status"] == "success"
    assert "Started background task" in seen["background"]["content"]
    # The completion reminder is in the ToolMessage content the model is given: once, after
    # the later call's own output.
    later = seen["later"]["content"]
    assert later.startswith("exit: 0\nlater\n"), later
    assert later.count('Background task "') == 1, later
    assert "completed (exit code: 0)" in later and "bg-finished" in later, later


@pytest.mark.long  # run by `make test-long`; make test runs the same client over HTTP
def test_langchain_mcp_adapters_over_stdio(tmp_path: Path, workspace: Path) -> None:
    seen = _langchain(
        {
            "transport": "stdio",
            "command": TOOLHUB,
            "args": toolhub_args(workspace),
            "env": toolhub_env(tmp_path),
            "cwd": str(workspace),
        }
    )
    _assert_langchain_saw(seen, workspace)
    assert "wrong_token" not in seen


def test_langchain_mcp_adapters_over_streamable_http(http_url: str, workspace: Path) -> None:
    seen = _langchain(
        {
            "transport": "streamable_http",
            "url": http_url,
            "headers": {"Authorization": f"Bearer {TOKEN}"},
        }
    )
    # get_tools() opens an MCP session per call: the reminder still reaches the later call,
    # since the background task belongs to the server's toolhub session, not the MCP one.
    _assert_langchain_saw(seen, workspace)
    assert "401 Unauthorized" in seen["wrong_token"], seen["wrong_token"]


# -- MCP Inspector CLI -------------------------------------------------------------------------


def inspector_bin() -> Path:
    """The Inspector's launcher (``tests/client_venvs.py``); a machine without node and npm
    skips, an install that fails fails the test."""
    try:
        return inspector_launcher()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    except RuntimeError as failed:
        pytest.fail(str(failed))


def _inspector(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mcp-inspector --cli ARGS`` with a private HOME (its catalog and auth storage)."""
    home = tmp_path / "inspector-home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [str(inspector_bin()), "--cli", "--connect-timeout", "60000", *args],
        env={**toolhub_env(tmp_path), "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=180,
    )


def _stdio(tmp_path: Path, workspace: Path) -> list[str]:
    """The Inspector's options for a stdio server: env, cwd, then the command itself."""
    env = ["-e", f"TOOLHUB_HOME={tmp_path / 'home'}", "-e", f"PYTHONPATH={ROOT}"]
    return [*env, "--cwd", str(workspace), "--", TOOLHUB, *toolhub_args(workspace)]


def _http(url: str, token: str = TOKEN) -> list[str]:
    auth = f"Authorization: Bearer {token}"
    return ["--transport", "http", "--server-url", url, "--header", auth]


def _listed(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert done.returncode == 0, done.stderr[-3000:]
    return {tool["name"]: tool for tool in json.loads(done.stdout)["tools"]}


def _call(tmp_path: Path, target: list[str], tool: str, *pairs: str) -> dict[str, Any]:
    args = ["--method", "tools/call", "--tool-name", tool, "--tool-arg", *pairs]
    done = _inspector(tmp_path, *args, *target)
    assert done.returncode in (0, 5), done.stderr[-3000:]  # 5: the tool returned isError
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["isError"] is (done.returncode == 5), (result, done.stderr)
    return result


def _assert_calls(tmp_path: Path, workspace: Path, target: list[str]) -> None:
    read = _call(tmp_path, target, "read_file", "path=hello.txt", "limit=5")
    assert read["content"][0] == {"type": "text", "text": read["content"][0]["text"]}
    assert read["content"][0]["text"].startswith(f"     1→{HELLO}"), read
    # The Inspector shows a result whole: no structured copy beside the text it would repeat.
    assert "toolhub/output" not in read.get("_meta", {})
    command = "command=echo $((6*7)) > out.txt; cat out.txt"
    bash = _call(tmp_path, target, "bash", command, "description=x")
    assert bash["content"][0]["text"] == "exit: 0\n42\n", bash
    assert (workspace / "out.txt").read_text() == "42\n", "ran in the workspace"
    outside = _call(tmp_path, target, "read_file", "path=/etc/passwd")
    assert outside["isError"] is True
    assert "outside the workspace" in outside["content"][0]["text"]


def _assert_listed(tools: dict[str, dict[str, Any]]) -> None:
    assert set(tools) >= NAMES, sorted(tools)
    schema = tools["read_file"]["inputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["path"]
    assert tools["read_file"]["annotations"]["readOnlyHint"] is True
    assert "command" in tools["bash"]["inputSchema"]["properties"]


@pytest.mark.long  # run by `make test-long`; make test runs the Inspector over HTTP
def test_inspector_cli_over_stdio(tmp_path: Path, workspace: Path) -> None:
    target = _stdio(tmp_path, workspace)
    _assert_listed(_listed(_inspector(tmp_path, "--method", "tools/list", *target)))
    _assert_calls(tmp_path, workspace, target)


@pytest.mark.parametrize(
    "era",
    [pytest.param("legacy", marks=pytest.mark.long), "modern"],  # legacy: `make test-long`
)
def test_inspector_cli_over_streamable_http(
    tmp_path: Path, workspace: Path, http_url: str, era: str
) -> None:
    target = ["--protocol-era", era, *_http(http_url)]
    _assert_listed(_listed(_inspector(tmp_path, "--method", "tools/list", *target)))
    _assert_calls(tmp_path, workspace, target)
    refused = _inspector(tmp_path, "--method", "tools/list", *_http(http_url, "wrong"))
    assert refused.returncode != 0 and refused.stdout == ""
    assert "auth_required" in refused.stderr, refused.stderr
