"""``python -m tests.mcp.mcp_test_server WORKSPACE``: toolhub's MCP server over stdio, on the
test tools (what ``toolhub mcp`` does with the built-ins)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.gateway.support import make_builder
from toolhub import Session
from toolhub.mcp.transports import run_stdio


def main() -> None:
    workspace = Path(sys.argv[1])
    session = Session.embedded(
        None,
        workspace,
        session_id="mcp-test",
        state_dir=workspace.parent / "mcp-state",
        builder=make_builder(),
    )
    with session:
        run_stdio(session)


if __name__ == "__main__":
    main()
