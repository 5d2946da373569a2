"""``toolhub mcp`` as a subprocess on stdio, the way MCP clients start it: the command, its
environment (no TOOLHUB_* of the test process, a private home) and a raw JSON-RPC pipe to it."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOOLHUB = str(Path(sys.executable).with_name("toolhub"))

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

#: A background command, then a later foreground call that outlasts it: the later result
#: carries the completion reminder (toolhub tells each completion once, after any call).
BACKGROUND = {
    "command": "sleep 0.2; echo bg-finished",
    "description": "background job",
    "is_background": True,
}
LATER = {"command": "sleep 2; echo later", "description": "a later call"}


def toolhub_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    return {**env, "TOOLHUB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}


def toolhub_args(workspace: Path, *extra: str) -> list[str]:
    return ["mcp", "--workspace", str(workspace), *extra]


def assert_reminded(text: str) -> None:
    """The completion reminder of ``BACKGROUND``, in what the model was given."""
    assert 'Background task "' in text and "completed (exit code: 0)" in text, text
    assert "bg-finished" in text, text


class RawStdio:
    """``toolhub mcp`` with a JSON-RPC pipe: ``send`` a frame, ``recv`` the next one."""

    def __init__(self, tmp_path: Path, workspace: Path) -> None:
        self.proc = subprocess.Popen(
            [TOOLHUB, *toolhub_args(workspace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=toolhub_env(tmp_path),
            cwd=workspace,
        )
        self._frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self._frames.put(json.loads(line))
        self._frames.put(None)

    def send(self, frame: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = 90) -> dict[str, Any] | None:
        """The next frame; None once stdout is closed. The first waits for the process to
        start, which takes far longer on a busy machine than on an idle one."""
        return self._frames.get(timeout=timeout)

    def handshake(self) -> dict[str, Any]:
        self.send(INITIALIZE)
        ready = self.recv()
        assert ready is not None and ready.get("id") == 1, ready
        self.send(INITIALIZED)
        return ready

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def rest(self, timeout: float = 90) -> list[dict[str, Any]]:
        """Every frame until stdout closes."""
        frames = []
        while (frame := self.recv(timeout)) is not None:
            frames.append(frame)
        return frames

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
