"""What a misusing MCP client is told (``toolhub/mcp/misuse.py``), over stdio in raw JSON-RPC:
a request before ``initialize`` says to send it first; an unknown tool names the close ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.stdio_support import RawStdio

pytestmark = pytest.mark.timeout(120)


def test_a_request_before_initialize_and_an_unknown_tool(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    raw = RawStdio(tmp_path, workspace)
    try:
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        early = raw.recv()
        assert early is not None and early["id"] == 1, early
        assert early["error"]["code"] == -32602
        assert "came before `initialize`" in early["error"]["message"], early
        assert early["error"]["data"] == {"method": "tools/list"}
        raw.handshake()
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "read_fil", "arguments": {}},
            }
        )
        unknown = raw.recv()
        assert unknown is not None and unknown["error"]["code"] == -32602, unknown
        assert "Did you mean `read_file`" in unknown["error"]["message"]
        assert "read_file" in unknown["error"]["data"]["suggestions"]
        raw.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
        pong = raw.recv()
        assert pong is not None and pong.get("result") == {}, "the connection still works"
    finally:
        raw.kill()
