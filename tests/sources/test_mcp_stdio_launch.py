"""A config's stdio MCP server runs confined as the session's commands are: a real server
(``probe_server.py``, copied into the workspace) still serves its tools from inside bubblewrap
and under Landlock, and from there reads no file outside the workspace, writes none, sees none
of toolhub's secrets in its environment and opens no connection. A launch that would hand it a
secret is refused, naming the variable; an unenforceable required sandbox starts nothing."""

from __future__ import annotations

import logging
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolhub import Session
from toolhub.distributed.settings import Settings
from toolhub.sandbox import SandboxUnavailable, probe, use_by_default
from toolhub.sandbox.landlock_syscalls import abi_version
from workers.guards.sandboxing import worker_sandbox

pytestmark = pytest.mark.timeout(120)

PROBE = Path(__file__).with_name("probe_server.py")
SECRETS = {
    "TOOLHUB_FLEET_KEY": "fleet-key-0123456789abcdef",
    "TOOLHUB_REDIS_URL": "redis://:hunter2-pw@redis.internal:6379/0",
    "TOOLHUB_API_TOKEN": "api-token-9f8e7d6c5b4a",
    "AWS_SECRET_ACCESS_KEY": "aws-8f7e6d5c4b3a2910",
}
MECHANISMS = [
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(not probe().available, reason="bwrap cannot sandbox here"),
    ),
    pytest.param(
        "landlock",
        marks=pytest.mark.skipif(abi_version() < 4, reason="needs Landlock ABI 4 (TCP rules)"),
    ),
]


@dataclass
class Box:
    base: Path
    ws: Path
    secret: Path

    def config(self, sandbox: dict[str, Any] | None, **server: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"enabled_background": False}
        if sandbox is not None:
            params["sandbox"] = sandbox
        probe_server = {"command": ["python", "probe_server.py"], **server}
        return {
            "tools": [{"id": "Main:bash", "params": params}],
            "mcp_servers": {"probe": probe_server},
        }

    def session(self, config: dict[str, Any]) -> Session:
        return Session.embedded(config, workspace=self.ws, state_dir=self.base / "state")


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Iterator[Box]:
    """Outside /tmp (a sandbox's /tmp is private anyway): a workspace holding the server, a
    secret file in a hidden directory beside it, a file in the session's state directory;
    toolhub's secrets in the environment."""
    base = Path(tempfile.mkdtemp(prefix="toolhub-mcpbox-", dir="/var/tmp"))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    try:
        ws, secret = base / "ws", base / ".keys" / "fleet.key"
        ws.mkdir()
        secret.parent.mkdir()
        secret.write_text("outside-secret\n")
        shutil.copy(PROBE, ws / "probe_server.py")
        (ws / "notes.txt").write_text("inside-notes\n")
        (base / "state").mkdir()
        (base / "state" / "planted.txt").write_text("session-state\n")
        yield Box(base, ws, secret)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def text(session: Session, tool: str, **args: Any) -> str:
    result = session.call_sync(f"probe__{tool}", args)
    assert not result.is_error, result.prompt_text
    return result.prompt_text


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_stdio_server_serves_its_tools_from_inside_the_sandbox(box: Box, mechanism: str) -> None:
    sandbox = {"mode": "workspace_write", "mechanism": mechanism, "require": True}
    config = box.config(sandbox, env={"PROBE_GREETING": "hello"})
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    with listener, box.session(config) as session:
        assert {"probe__read", "probe__write", "probe__env"} <= set(session.toolset.entries)
        # Legitimate work: the workspace, the config's own variable.
        assert "inside-notes" in text(session, "read", path=str(box.ws / "notes.txt"))
        assert "written" in text(session, "write", path=str(box.ws / "out.txt"), text="ok")
        assert (box.ws / "out.txt").read_text() == "ok"
        assert "hello" in text(session, "env", name="PROBE_GREETING")
        # Nothing outside it.
        outside = text(session, "read", path=str(box.secret))
        assert "error" in outside and "outside-secret" not in outside
        state = text(session, "read", path=str(box.base / "state" / "planted.txt"))
        assert "error" in state and "session-state" not in state
        escape = text(session, "write", path=str(box.base / "escape.txt"), text="x")
        assert "error" in escape and not (box.base / "escape.txt").exists()
        for name in SECRETS:
            assert "<unset>" in text(session, "env", name=name), name
        assert "error" in text(session, "connect", port=port)


@pytest.mark.skipif(not probe().available, reason="bwrap cannot sandbox here")
def test_a_worker_confines_a_server_whose_config_names_no_sandbox(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's tool set is assembled as an embedded one is, under the worker's default
    sandbox (``workers/guards/sandboxing.py``), which hides the workspace root holding every
    session."""
    monkeypatch.setenv("TOOLHUB_WORKSPACE_ROOT", str(box.base))
    try:
        use_by_default(worker_sandbox(Settings.from_env("redis://127.0.0.1:1/0")), require=True)
        with box.session(box.config(None)) as session:
            assert "inside-notes" in text(session, "read", path=str(box.ws / "notes.txt"))
            outside = text(session, "read", path=str(box.secret))
            assert "error" in outside and "outside-secret" not in outside
            assert "<unset>" in text(session, "env", name="TOOLHUB_FLEET_KEY")
    finally:
        use_by_default(None)


def test_unconfined_a_server_still_gets_the_allowlisted_environment_only(box: Box) -> None:
    with box.session(box.config(None, env={"PROBE_GREETING": "hello"})) as session:
        assert "hello" in text(session, "env", name="PROBE_GREETING")
        for name in SECRETS:
            assert "<unset>" in text(session, "env", name=name), name


def test_a_launch_carrying_a_secret_is_refused_and_a_clean_one_runs(
    box: Box, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``${TOOLHUB_FLEET_KEY}`` itself never expands (tests/tenancy/test_policy.py); the launch
    # check is on values, so it holds for a copy of the key under any other name too.
    monkeypatch.setenv("COPY_OF_THE_KEY", SECRETS["TOOLHUB_FLEET_KEY"])
    config = box.config({"mode": "workspace_write", "require": False})
    leaky = {"command": ["python", "probe_server.py"], "env": {"KEY": "${COPY_OF_THE_KEY}"}}
    config["mcp_servers"]["leaky"] = leaky
    with (
        caplog.at_level(logging.WARNING, "toolhub.sources.mcp_client"),
        box.session(config) as session,
    ):
        refused = [w for w in session.warnings if "'leaky' not started" in w]
        assert refused and "TOOLHUB_FLEET_KEY" in refused[0]
        assert not [e for e in session.toolset.entries if e.startswith("leaky__")]
        assert "hello" not in text(session, "env", name="KEY")  # the clean server serves
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'leaky' not started" in line for line in logged)
    assert not [line for line in logged + session.warnings if SECRETS["TOOLHUB_FLEET_KEY"] in line]


def test_an_unenforceable_required_sandbox_starts_no_server(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_BWRAP", str(box.base / "no-bwrap"))
    marker = box.ws / "started"
    config = box.config({"mechanism": "bwrap", "require": True})
    config["mcp_servers"]["probe"] = {"command": ["touch", str(marker)]}
    with pytest.raises(SandboxUnavailable, match="cannot be enforced"):
        box.session(config)
    assert not marker.exists()
