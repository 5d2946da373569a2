"""``toolhub mcp`` needs only the ``[mcp]`` extra: with FastAPI (the ``[gateway]`` extra) and
the gateway package unimportable, the MCP transports load and the HTTP app still guards its
endpoint with the bearer token."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoGateway(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "fastapi" or name.startswith("toolhub.gateway"):
                raise ImportError(f"{name} is blocked: only the [mcp] extra is installed")
            return None

    sys.meta_path.insert(0, NoGateway())

    from starlette.testclient import TestClient

    import toolhub.cli.main  # the `toolhub mcp` command and everything it registers
    from toolhub import Session
    from toolhub.mcp.transports import http_app, run_http, run_stdio

    with Session.embedded(config={"tools": [{"id": "Main:read_file"}]}, workspace=sys.argv[1]) as s:
        app = http_app(s, host="127.0.0.1", token="secret")
        refused = TestClient(app).post("/mcp", json={})
        assert refused.status_code == 401, refused.status_code
    assert not any(m.split(".")[0] == "fastapi" for m in sys.modules)
    print("ok")
    """
)


def test_mcp_transports_load_without_the_gateway_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
