"""The gateway's session table, bounded per tenant with idle eviction, on a real gateway with
two tenants (named API keys, embedded sessions): a flood of sessions from one tenant ends in a
typed ``rate_limited`` error (429, ``Retry-After``) while the other tenant still creates
sessions; an idle session is evicted, its files kept, and comes back by its id; a session
running a call is never evicted."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.gateway.support import make_builder
from toolhub import Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.tenancy import POLICY_ENV
from toolhub.tenancy.keys import KeyFile
from toolhub.tenancy.principal import client_session_id
from toolhub.toolset import ConfigSource

pytestmark = pytest.mark.timeout(120)

SHARE = 5


@dataclass
class Fleet:
    url: str
    gateway: object
    key: dict[str, str]

    def client(self, tenant: str) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.key[tenant]}"}
        return httpx.Client(base_url=self.url, timeout=30, headers=headers)


def _fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idle: float) -> Iterator[Fleet]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"quotas:\n  default:\n    sessions: {SHARE}\n    session_idle_seconds: {idle}\n"
    )
    monkeypatch.setenv(POLICY_ENV, str(policy))
    root = tmp_path / "root"
    root.mkdir()
    keys = KeyFile(tmp_path / "keys.json")
    made = {"acme": keys.create("acme")[1], "globex": keys.create("globex")[1]}
    builder = make_builder()

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        state = tmp_path / "state" / session_id
        return Session.embedded(
            config, workspace, session_id=session_id, state_dir=state, builder=builder
        )

    settings = GatewaySettings(workspace=root, keepalive_s=0.5, keys_file=keys.path)
    app = create_app(settings, factory=factory)
    with ThreadedServer(app) as server:
        yield Fleet(server.url, app.state.gateway, made)


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    yield from _fleet(tmp_path, monkeypatch, idle=3600)


@pytest.fixture
def idle_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    yield from _fleet(tmp_path, monkeypatch, idle=1.0)


def test_a_session_flood_is_rate_limited_and_another_tenant_still_creates(fleet: Fleet) -> None:
    with fleet.client("acme") as a, fleet.client("globex") as b:
        codes = [a.post("/v1/sessions", json={}).status_code for _ in range(SHARE + 20)]
        assert codes[:SHARE] == [201] * SHARE and set(codes[SHARE:]) == {429}
        refused = a.post("/v1/sessions", json={})
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        error = refused.json()["error"]
        assert error["kind"] == "rate_limited"
        assert error["details"]["quota"] == "sessions" and error["details"]["limit"] == SHARE
        assert f"holds its {SHARE} sessions" in error["detail"]
        # The other tenant is not held up by the first one's flood.
        for _ in range(SHARE):
            assert b.post("/v1/sessions", json={}).status_code == 201
        # Acme's sessions still work; ending one makes room for one more.
        sid = a.post("/v1/sessions", json={"session_id": "mine"})
        assert sid.status_code == 429
        held = [s.session_id for s in fleet.gateway.sessions.all() if "acme" in s.session_id]  # type: ignore[attr-defined]
        assert len(held) == SHARE
        client_id = client_session_id(held[0])
        reply = a.post(
            f"/v1/sessions/{client_id}/calls", json={"name": "echo", "arguments": {"text": "hi"}}
        )
        assert reply.status_code == 200 and reply.json()["is_error"] is False
        assert a.delete(f"/v1/sessions/{client_id}").status_code in (200, 204)
        assert a.post("/v1/sessions", json={}).status_code == 201


def test_a_burst_of_concurrent_creates_stays_within_the_share(fleet: Fleet) -> None:
    results: list[int] = []

    def create() -> None:
        with fleet.client("acme") as a:
            results.append(a.post("/v1/sessions", json={}).status_code)

    threads = [threading.Thread(target=create) for _ in range(3 * SHARE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results.count(201) == SHARE and results.count(429) == 2 * SHARE


def test_idle_sessions_are_evicted_and_come_back_by_their_id(idle_fleet: Fleet) -> None:
    gw = idle_fleet.gateway
    with idle_fleet.client("acme") as a:
        assert a.post("/v1/sessions", json={"session_id": "keep"}).status_code == 201
        assert a.post("/v1/sessions", json={"session_id": "busy"}).status_code == 201
        # A call that outlives its request (the client stops waiting; the call runs on).
        with pytest.raises(httpx.ReadTimeout):
            a.post(
                "/v1/sessions/busy/calls",
                json={"name": "nap", "arguments": {"seconds": 8}, "call_id": "long"},
                timeout=0.5,
            )
        for _ in range(SHARE - 2):
            assert a.post("/v1/sessions", json={}).status_code == 201
        assert a.post("/v1/sessions", json={}).status_code == 429
        time.sleep(2.5)
        # Past the idle time: the next create evicts the idle ones and is admitted; the one
        # running a call stays.
        assert a.post("/v1/sessions", json={}).status_code == 201
        held = sorted(client_session_id(s.session_id) for s in gw.sessions.all())  # type: ignore[attr-defined]
        assert len(held) == 2 and "busy" in held and "keep" not in held
        # The evicted session comes back by its id (embedded: re-created, its files kept),
        # and the busy one's call finishes.
        assert a.post("/v1/sessions", json={"session_id": "keep"}).status_code == 201
        done = a.get("/v1/sessions/busy/calls/long/events", timeout=30).text
        assert "event: result" in done
