"""Call ids are scoped to their session (issue 13.5): session B, knowing session A's call id,
can neither read A's record, follow its events, cancel it, answer it, nor take its id over —
on one embedded gateway, and across two replicas of a distributed one (real Redis, real
workers). A's call runs to its end and its record and events are unchanged afterwards."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import Stack, shared_stack
from tests.gateway.conftest import MakeGateway
from tests.gateway.support import sse_events
from toolhub import Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.distributed import distributed_parts
from toolhub.toolset import ConfigSource

pytestmark = pytest.mark.timeout(120)


def _attack(b: httpx.Client, sid_b: str, victim: str) -> None:
    """Everything session B tries on A's call ``victim`` through B's own session."""
    base = f"/v1/sessions/{sid_b}/calls/{victim}"
    assert b.get(base).status_code == 404
    assert b.get(f"{base}/events").status_code == 404
    assert b.delete(base).status_code == 404
    answered = b.post(f"/v1/sessions/{sid_b}/answers/{victim}", json={"answers": {"q": "x"}})
    assert answered.status_code == 404
    for method in ("GET", "DELETE"):
        gone = b.request(method, f"/v1/calls/{victim}")
        assert gone.status_code == 410 and "/v1/sessions/{session_id}/calls" in gone.text


def test_embedded_calls_are_scoped_to_their_session(make_gateway: MakeGateway) -> None:
    url = make_gateway()
    with httpx.Client(base_url=url, timeout=30) as a, httpx.Client(base_url=url, timeout=30) as b:
        sid_a = a.post("/v1/sessions", json={}).json()["session_id"]
        sid_b = b.post("/v1/sessions", json={}).json()["session_id"]
        body = {"name": "nap", "arguments": {"seconds": 1.0}, "call_id": "a-nap"}
        with a.stream(
            "POST",
            f"/v1/sessions/{sid_a}/calls",
            json=body,
            headers={"Accept": "text/event-stream"},
        ) as running:
            lines = running.iter_lines()
            for line in lines:
                if line.startswith("event: progress"):
                    break
            _attack(b, sid_b, "a-nap")
            taken = b.post(f"/v1/sessions/{sid_b}/calls", json={"name": "echo", "call_id": "a-nap"})
            assert taken.status_code == 409 and "taken" in taken.text
            rest = "\n".join(lines)
        result = sse_events(rest + "\n\n")[-1]
        assert result["event"] == "result" and result["data"]["error"] is None, result
        # After it finished too: still A's, and B still cannot take the id over.
        _attack(b, sid_b, "a-nap")
        again = b.post(
            f"/v1/sessions/{sid_b}/calls",
            json={"name": "echo", "arguments": {"text": "mine"}, "call_id": "a-nap"},
        )
        assert again.status_code == 409
        record = a.get(f"/v1/sessions/{sid_a}/calls/a-nap").json()
        assert record["status"] == "succeeded" and record["session_id"] == sid_a
        replay = sse_events(a.get(f"/v1/sessions/{sid_a}/calls/a-nap/events").text)
        assert replay[-1]["data"]["output"]["value"] == {"slept": 1.0}


@pytest.fixture
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    stack: Stack = shared_stack(request)
    root = tmp_path / "root"
    root.mkdir()
    builder = make_builder()

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        return Session.connect(stack.url, config, workspace, session_id=session_id, builder=builder)

    settings = GatewaySettings(workspace=root, redis_url=stack.url, keepalive_s=0.5)
    servers = [
        ThreadedServer(create_app(settings, factory=factory, **distributed_parts(stack.url)))
        for _ in range(2)
    ]
    for server in servers:
        server.start()
    yield servers[0].url, servers[1].url, stack.url
    for server in servers:
        server.stop()


def test_distributed_calls_are_scoped_across_replicas(
    replicas: tuple[str, str, str], tmp_path: Path
) -> None:
    first, second, redis_url = replicas
    with httpx.Client(base_url=first, timeout=30) as a, httpx.Client(base_url=second) as b:
        sid_a = a.post("/v1/sessions", json={"config": CONFIG}).json()["session_id"]
        sid_b = b.post("/v1/sessions", json={"config": CONFIG}).json()["session_id"]
        victim = f"a-sleep-{time.monotonic_ns()}"
        body = {"name": "sleeper", "arguments": {"seconds": 1.5}, "call_id": victim}
        with a.stream(
            "POST",
            f"/v1/sessions/{sid_a}/calls",
            json=body,
            headers={"Accept": "text/event-stream"},
        ) as running:
            lines = running.iter_lines()
            for line in lines:
                if line.startswith("event: progress"):
                    break
            _attack(b, sid_b, victim)
            rest = "\n".join(lines)
        result = sse_events(rest + "\n\n")[-1]
        assert result["data"]["error"] is None, result
        # Finished: B's replica still cannot read it, and reusing the id does not replace it.
        _attack(b, sid_b, victim)
        reused = b.post(f"/v1/sessions/{sid_b}/calls", json={"name": "noop", "call_id": victim})
        assert reused.json()["error"]["details"]["code"] == "call_id_in_use"
        # What B can follow under that id now is its own refused attempt, nothing of A's.
        (own,) = sse_events(b.get(f"/v1/sessions/{sid_b}/calls/{victim}/events").text)
        assert own["data"]["error"]["details"]["code"] == "call_id_in_use"
        assert b.get(f"/v1/sessions/{sid_b}/calls/{victim}").status_code == 404
        record = b.get(f"/v1/sessions/{sid_a}/calls/{victim}").json()
        assert record["session_id"] == sid_a and record["name"] == "sleeper"
        assert record["status"] == "succeeded"
    # The Python API is scoped the same way.
    other = Session.connect(
        redis_url, CONFIG, tmp_path, session_id="s-other", builder=make_builder()
    )
    try:
        assert other.record_sync(victim) is None
        (last,) = list(other.follow_sync(victim))
        assert last.error is not None and last.error.kind.value == "not_found", last
    finally:
        other.close()
