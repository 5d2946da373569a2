"""The gateway in front of the real distributed stack (redis-server + ``toolhub worker``
processes, the distributed suite's shared stack): SSE ids are the Redis stream's sequence
numbers, a second replica serves replay, resume, records and cancel for calls it did not start,
and probes and metrics read Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import Stack, shared_stack
from tests.gateway.support import sse_events
from toolhub import Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.distributed import distributed_parts
from toolhub.gateway.sessions import RECHECK_S
from toolhub.toolset import ConfigSource

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two gateway replicas on the same Redis and workspace root."""
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
    yield servers[0].url, servers[1].url
    for server in servers:
        server.stop()


def test_distributed_calls_resume_on_another_replica(replicas: tuple[str, str]) -> None:
    first, second = replicas
    with httpx.Client(base_url=first, timeout=30) as a, httpx.Client(base_url=second) as b:
        assert a.get("/healthz").json()["deployment"] == "distributed"
        ready = a.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"] == {"redis": "ok", "workers": "ok"}

        sid = a.post("/v1/sessions", json={"config": CONFIG}).json()["session_id"]
        names = {t["name"] for t in b.get(f"/v1/sessions/{sid}/tools?format=mcp").json()}
        assert {"ticks", "sleeper"} <= names, "the other replica recovers the session"

        body = {"name": "ticks", "arguments": {"n": 6, "delay_ms": 20}, "call_id": "d-ticks"}
        events = sse_events(
            a.post(
                f"/v1/sessions/{sid}/calls", json=body, headers={"Accept": "text/event-stream"}
            ).text
        )
        assert [e["id"] for e in events] == list(range(1, 8))
        assert events[-1]["data"]["output"]["value"]["total"] == 6

        replayed = sse_events(b.get(f"/v1/sessions/{sid}/calls/d-ticks/events").text)
        assert [(e["id"], e["event"]) for e in replayed] == [
            (e["id"], e["event"]) for e in events
        ], "the replica reading Redis numbers events exactly like the one that ran the call"
        assert replayed[-1]["data"] == events[-1]["data"]
        resumed = sse_events(
            b.get(f"/v1/sessions/{sid}/calls/d-ticks/events", headers={"Last-Event-ID": "4"}).text
        )
        assert [e["id"] for e in resumed] == [5, 6, 7]

        record = b.get(f"/v1/sessions/{sid}/calls/d-ticks").json()
        assert record["status"] == "succeeded" and record["name"] == "ticks"
        assert b.get(f"/v1/sessions/{sid}/calls/never-made").status_code == 404

        metrics = a.get("/metrics").text
        assert 'toolhub_calls_total{outcome="ok",tool="ticks"} 1.0' in metrics
        assert 'toolhub_queue_depth{queue="toolhub.fast"}' in metrics


def test_cancel_from_another_replica(replicas: tuple[str, str]) -> None:
    first, second = replicas
    with httpx.Client(base_url=first, timeout=30) as a, httpx.Client(base_url=second) as b:
        sid = a.post("/v1/sessions", json={"config": CONFIG}).json()["session_id"]
        with a.stream(
            "POST",
            f"/v1/sessions/{sid}/calls",
            json={"name": "sleeper", "arguments": {"seconds": 60}, "call_id": "d-sleep"},
            headers={"Accept": "text/event-stream"},
        ) as response:
            lines = response.iter_lines()
            for line in lines:
                if line.startswith("event: progress"):
                    break
            started = time.monotonic()
            cancelled = b.delete(f"/v1/sessions/{sid}/calls/d-sleep")
            assert cancelled.status_code == 202 and cancelled.json()["cancelled"] is True
            rest = "\n".join(lines)
        result = sse_events(rest + "\n\n")[-1]
        assert result["data"]["error"]["kind"] == "cancelled"
        assert time.monotonic() - started < 10
        assert b.get(f"/v1/sessions/{sid}/calls/d-sleep").json()["status"] == "cancelled"


def test_a_deleted_session_is_gone_for_every_replica(replicas: tuple[str, str]) -> None:
    """``DELETE`` on one replica (even one that never served the session) ends it: no replica
    rebuilds it from Redis afterwards (issue 16: it came back on the next GET)."""
    first, second = replicas
    with httpx.Client(base_url=first, timeout=30) as a, httpx.Client(base_url=second) as b:
        sid = a.post("/v1/sessions", json={"config": CONFIG}).json()["session_id"]
        done = a.post(f"/v1/sessions/{sid}/calls", json={"name": "noop", "call_id": "del-1"})
        assert done.json()["error"] is None
        assert b.delete(f"/v1/sessions/{sid}").status_code == 204
        assert b.get(f"/v1/sessions/{sid}/tools").status_code == 404
        # The replica that held it notices within a second (RECHECK_S): 30 on a busy machine.
        deadline = time.monotonic() + 30
        while a.get(f"/v1/sessions/{sid}/tools").status_code != 404:
            assert time.monotonic() < deadline, "the holding replica still serves it"
            time.sleep(0.1)
        for client in (a, b):
            call = client.post(f"/v1/sessions/{sid}/calls", json={"name": "noop"})
            assert call.status_code == 404
        assert b.delete(f"/v1/sessions/{sid}").status_code == 404


def test_a_call_checks_a_session_ended_elsewhere(replicas: tuple[str, str]) -> None:
    """The replica holding a session answers its next call only after asking the store again
    once ``RECHECK_S`` has passed: a session another replica ended takes no more calls, even
    on the gateway's shortcut for plain JSON calls (``Sessions.held``)."""
    first, second = replicas
    with httpx.Client(base_url=first, timeout=30) as a, httpx.Client(base_url=second) as b:
        sid = a.post("/v1/sessions", json={"config": CONFIG}).json()["session_id"]
        assert a.post(f"/v1/sessions/{sid}/calls", json={"name": "noop"}).status_code == 200
        assert b.delete(f"/v1/sessions/{sid}").status_code == 204
        time.sleep(RECHECK_S + 0.1)
        call = a.post(f"/v1/sessions/{sid}/calls", json={"name": "noop"})
        assert call.status_code == 404, call.text
