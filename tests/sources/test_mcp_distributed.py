"""MCP servers in a distributed session (``Session.connect``). A streamable-HTTP server's tools
are listed, validated and called like any tool while the built-in calls of the same session run
on the workers. A stdio server runs on the workers only, inside the session's sandbox: the
dispatcher shows the tools a worker published and sends their calls to the workers; one the
workers' policy does not grant is refused with a violation naming it, and nothing starts."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.distributed.helpers import worker_pid
from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import FLEET_POLICY, shared_stack
from toolhub import CallResult, ConfigError, Progress, Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.distributed import distributed_parts
from toolhub.mcp.transports import http_app
from toolhub.sandbox import probe
from toolhub.toolset import ConfigSource

pytestmark = pytest.mark.timeout(120)

TOKEN = "remote-token"
#: The stdio server the workers' policy grants (tests/fleet_policy.yaml), with its command.
TIME = {"time": {"command": ["python", "-m", "mcp_server_time"]}}


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[str]:
    """Another toolhub serving the suite's test tools over MCP (streamable HTTP)."""
    (tmp_path / "remote").mkdir()
    session = Session.embedded(
        {"tools": [{"id": "Test:ticks"}]},
        tmp_path / "remote",
        state_dir=tmp_path / "remote-state",
        builder=make_builder(),
    )
    server = ThreadedServer(http_app(session, host="127.0.0.1", token=TOKEN))
    server.server.config.timeout_graceful_shutdown = 0.5
    with session, server:
        yield f"{server.url}/mcp"


def test_an_http_server_in_a_distributed_session(
    request: pytest.FixtureRequest, tmp_path: Path, remote: str
) -> None:
    stack = shared_stack(request)
    far = {"url": remote, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    config = {**CONFIG, "mcp_servers": {"far": far}}
    (tmp_path / "ws").mkdir()
    with Session.connect(stack.url, config, tmp_path / "ws", builder=make_builder()) as session:
        assert "far__ticks" in session.toolset.entries
        far_ticks = session.call_sync("far__ticks", {"n": 2})
        assert not far_ticks.is_error, far_ticks.prompt_text
        ticks = session.call_sync("ticks", {"n": 2})
        assert not ticks.is_error and ticks.output is not None
        assert ticks.output.value["worker_pid"] != 0, "ran on a worker"
    assert "far__ticks" not in session.toolset.entries


def _ancestors(pid: int) -> list[int]:
    """``pid``'s parent, its parent, ... up to init."""
    chain = []
    process: psutil.Process | None = psutil.Process(pid).parent()
    while process is not None:
        chain.append(process.pid)
        process = process.parent()
    return chain


def test_a_stdio_server_runs_on_a_worker_and_its_tools_reach_the_dispatcher(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stack = shared_stack(request)
    config = {**CONFIG, "mcp_servers": TIME}
    (tmp_path / "ws").mkdir()
    with Session.connect(stack.url, config, tmp_path / "ws", builder=make_builder()) as session:
        names = {d["function"]["name"] for d in session.definitions("openai")}
        assert {"time__get_current_time", "time__convert_time"} <= names
        now = session.call_sync("time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error, now.prompt_text
        assert "UTC" in now.prompt_text
        record = session.record_sync(now.call_id)
        assert record is not None
        workers = {w.pid for w in stack.workers}
        assert worker_pid(record) in workers, "the call ran on a worker"
        servers = [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if "mcp_server_time" in " ".join(p.info["cmdline"] or ())
            and os.getpid() in _ancestors(p.pid)
        ]
        assert servers, "the server runs"
        for server in servers:
            chain = [server, *_ancestors(server)]
            assert workers & set(chain), "started by a worker, not the dispatcher"
            if probe().available:  # the workers confine with bubblewrap: the server is inside
                below = chain[: min(chain.index(pid) for pid in workers & set(chain))]
                assert any(psutil.Process(pid).name() == "bwrap" for pid in below), below
    assert "time__get_current_time" not in session.toolset.entries


def test_a_stdio_server_outside_the_policy_is_refused_and_nothing_starts(
    request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stack = shared_stack(request)
    marker = tmp_path / "started"
    config = {**CONFIG, "mcp_servers": {"local": {"command": ["touch", str(marker)]}}}
    with (
        caplog.at_level(logging.WARNING, "toolhub.sources.mcp_fleet_tools"),
        pytest.raises(ConfigError) as refused,
    ):
        Session.connect(stack.url, config, tmp_path, session_id="acme~s1", builder=make_builder())
    (violation,) = refused.value.violations
    assert violation.field_path == "mcp_servers.local.command"
    assert "'local' not started on the fleet's workers" in violation.message
    assert "refused by the operator policy" in violation.message
    assert not marker.exists(), "nothing was started"
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("tenant acme" in line and "local" in line for line in logged)
    # The same session without it still runs on the workers.
    with Session.connect(stack.url, CONFIG, tmp_path, builder=make_builder()) as session:
        ticks = session.call_sync("ticks", {"n": 1})
        assert not ticks.is_error and ticks.output is not None
        assert ticks.output.value["worker_pid"] != 0


def test_a_gateway_on_redis_serves_an_operator_granted_stdio_server_from_the_workers(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tenant names the granted server without a command; the gateway's admission gives it
    the operator's, the workers run it, the gateway lists and calls its tools. A server the
    policy does not grant is refused by the gateway's admission; nothing starts."""
    stack = shared_stack(request)
    monkeypatch.setenv("TOOLHUB_POLICY", str(FLEET_POLICY))  # the gateway's, as the workers'
    builder = make_builder()

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        return Session.connect(stack.url, config, workspace, session_id=session_id, builder=builder)

    settings = GatewaySettings(workspace=tmp_path, redis_url=stack.url)
    app = create_app(settings, factory=factory, **distributed_parts(stack.url))
    marker = tmp_path / "started"
    with ThreadedServer(app) as server, httpx.Client(base_url=server.url, timeout=90) as client:
        granted = {**CONFIG, "mcp_servers": {"time": {}}}
        made = client.post("/v1/sessions", json={"config": granted, "session_id": "gw-time"})
        assert made.status_code == 201, made.text
        tools = client.get("/v1/sessions/gw-time/tools").json()
        assert "time__get_current_time" in {t["function"]["name"] for t in tools}
        call = {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}
        answer = client.post("/v1/sessions/gw-time/calls", json=call).json()
        assert answer["error"] is None, answer
        other = {**CONFIG, "mcp_servers": {"other": {"command": ["touch", str(marker)]}}}
        refused = client.post("/v1/sessions", json={"config": other, "session_id": "gw-other"})
        assert refused.status_code == 422, refused.text
        assert "mcp_servers.other" in refused.text and "policy" in refused.text
    assert not marker.exists(), "nothing was started"


@pytest.mark.parametrize("tasks", [False, True], ids=["on-the-dispatcher", "on-a-worker"])
def test_a_remote_servers_question_reaches_the_distributed_caller(
    request: pytest.FixtureRequest, tmp_path: Path, tasks: bool
) -> None:
    """A remote toolhub's ``ask_user``, called as an external tool of a distributed session: its
    question is relayed as this call's ``input_required`` (``mcp_elicit.py``), and the answer
    given to the connected session goes back to the remote server. Without ``tasks`` the
    dispatcher runs the call; with it (2026-07-28) a worker does, so the question crosses Redis
    (the session's answer box, the call's progress) both ways."""
    stack = shared_stack(request)
    (tmp_path / "remote").mkdir()
    remote = Session.embedded(None, tmp_path / "remote", state_dir=tmp_path / "remote-state")
    server = ThreadedServer(http_app(remote, host="127.0.0.1", token=TOKEN))
    server.server.config.timeout_graceful_shutdown = 0.5
    far = {
        "url": f"{server.url}/mcp",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "tasks": tasks,
    }
    question = {"question": "Ship it?", "options": ["yes", "no"]}
    (tmp_path / "ws").mkdir()
    with remote, server:
        config = {**CONFIG, "mcp_servers": {"far": far}}
        with Session.connect(stack.url, config, tmp_path / "ws", builder=make_builder()) as session:
            result = None
            asked = []
            for item in session.stream_sync("far__ask_user", {"questions": [question]}):
                if isinstance(item, Progress) and item.subkind == "input_required":
                    asked.append(item.payload)
                    assert session.answer(item.payload["call_id"], ["yes"])
                elif isinstance(item, CallResult):
                    result = item
    assert len(asked) == 1 and "Ship it?" in asked[0]["questions"][0]["question"]
    assert result is not None and "Q: Ship it?\nA: yes" in result.prompt_text, result
