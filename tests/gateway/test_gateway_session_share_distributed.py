"""Idle eviction on a distributed gateway (the shared real stack): an evicted session keeps
its stored state, and the next request naming it recovers it from Redis as a session of
another replica is recovered, within its tenant's share (the least recently used one not
running a call makes room)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import Stack, shared_stack
from toolhub import Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.distributed import distributed_parts
from toolhub.tenancy import POLICY_ENV
from toolhub.toolset import ConfigSource

pytestmark = pytest.mark.timeout(120)

SHARE = 2


@pytest.fixture
def gateway(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, object]]:
    stack: Stack = shared_stack(request)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"quotas:\n  default:\n    sessions: {SHARE}\n    session_idle_seconds: 1.0\n"
    )
    monkeypatch.setenv(POLICY_ENV, str(policy))
    root = tmp_path / "root"
    root.mkdir()
    builder = make_builder()

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        return Session.connect(stack.url, config, workspace, session_id=session_id, builder=builder)

    settings = GatewaySettings(workspace=root, redis_url=stack.url, keepalive_s=0.5)
    app = create_app(settings, factory=factory, **distributed_parts(stack.url))
    with ThreadedServer(app) as server:
        yield server.url, app.state.gateway


def _ticks(c: httpx.Client, sid: str, call_id: str) -> dict:
    body = {"name": "ticks", "arguments": {"n": 2, "delay_ms": 1}, "call_id": call_id}
    reply = c.post(f"/v1/sessions/{sid}/calls", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_an_evicted_session_is_recovered_by_its_next_request(gateway) -> None:
    url, gw = gateway
    with httpx.Client(base_url=url, timeout=30) as c:
        assert (
            c.post("/v1/sessions", json={"config": CONFIG, "session_id": "ev1"}).status_code == 201
        )
        assert not _ticks(c, "ev1", "before")["is_error"]
        time.sleep(2.5)
        # Idle past its time: the next create evicts it; Redis still holds it.
        assert (
            c.post("/v1/sessions", json={"config": CONFIG, "session_id": "ev2"}).status_code == 201
        )
        assert gw.sessions.get("ev1") is None
        # A request naming it recovers it, and its earlier call's record is still there.
        assert not _ticks(c, "ev1", "after")["is_error"]
        assert gw.sessions.get("ev1") is not None
        assert c.get("/v1/sessions/ev1/calls/before").status_code == 200
        # At its share (ev1 and ev2 held, neither idle yet), a new session is refused.
        assert c.post("/v1/sessions", json={"config": CONFIG}).status_code == 429
        assert len(gw.sessions.all()) == SHARE
