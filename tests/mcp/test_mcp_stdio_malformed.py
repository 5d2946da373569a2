"""``toolhub mcp`` on stdio answers lines that are not JSON-RPC messages (issue 13.8) instead
of dropping them, which left the client waiting: -32700 for text that is not JSON, -32600 for
JSON that is not a message, ``id: null``; blank lines are skipped and the server keeps
serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))


def test_malformed_lines_get_json_rpc_errors(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env["TOOLHUB_HOME"] = str(tmp_path / "home")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    lines = ["this is not json", "", '{"hello": "world"}', "[1, 2", json.dumps(initialize)]
    done = subprocess.run(
        [TOOLHUB, "mcp", "--workspace", str(tmp_path)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    codes = [r["error"]["code"] for r in replies if "error" in r]
    assert codes == [-32700, -32600, -32700], replies
    assert all(r["id"] is None for r in replies if "error" in r)
    (ready,) = [r for r in replies if r.get("id") == 1]
    assert ready["result"]["serverInfo"]["name"], ready
    assert "Traceback" not in done.stderr
