"""``toolhub demo`` as a subprocess, embedded and on the local stack: every step of the episode
runs, the exit code is 0, and nothing the demo started is left running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
STEPS = [
    "[1/7] create a session and list its tools",
    "[2/7] read a file, edit it, read it again",
    "[3/7] run a command, streaming its output",
    "[4/7] start a background command, then collect it",
    "[5/7] cancel a runaway command",
    "[6/7] answer an ask_user question",
    "[7/7] call a tool of an external MCP server",
]


# The stack episode (two workers, a gateway, Redis) runs in `make test-long` and `make demo`.
@pytest.mark.parametrize("mode", ["embedded", pytest.param("stack", marks=pytest.mark.long)])
def test_demo_runs_the_whole_episode(mode: str, tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env.update(TOOLHUB_HOME=str(tmp_path / "home"), COLUMNS="120")
    args = [TOOLHUB, "demo", *(["--embedded"] if mode == "embedded" else [])]
    done = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for step in STEPS:
        assert step in out, step
    assert "build step 5" in out and "background job finished" in out
    assert "cancelled after" in out and "A: yes" in out and '"timezone": "UTC"' in out
    assert "status: shipped" in out
    assert "demo finished" in out and "stopped everything the demo started" in out
    if mode == "stack":
        assert "Flower http://127.0.0.1:" in out and "password" in out
