"""Two tenants on two gateway replicas in front of the real distributed stack (redis-server and
``toolhub worker`` processes): a replica recovers a session another created only for the
session's own tenant, through the tenant-scoped id; both tenants may use the same session id,
and their calls run on the workers in separate workspaces; one tenant's call records, events
and cancels are out of the other's reach even from a session of the same id."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed.plugin_tools import TOOLS
from tests.fixtures_stack import Stack, shared_stack
from tests.gateway.support import sse_events
from toolhub import Session
from toolhub.distributed.settings import Settings
from toolhub.distributed.shared import shared_backend
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.distributed import distributed_parts
from toolhub.tenancy.keys import KeyFile
from toolhub.tools import CATALOG
from toolhub.toolset import ConfigSource, ToolSetBuilder

pytestmark = pytest.mark.timeout(180)

CONFIG = {
    "tools": [
        {"id": "Test:ticks"},
        {"id": "Test:sleeper"},
        {"id": "Main:write_file"},
    ]
}


@pytest.fixture
def fleet(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Stack, Path, list[str], dict[str, str]]]:
    """Two replicas on one Redis, one workspace root and one key file (acme, globex)."""
    stack: Stack = shared_stack(request)
    root = tmp_path / "root"
    root.mkdir()
    keys = KeyFile(tmp_path / "keys.json")
    made = {tenant: keys.create(tenant)[1] for tenant in ("acme", "globex")}
    builder = ToolSetBuilder(CATALOG, plugins=False).register(*TOOLS)

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        return Session.connect(stack.url, config, workspace, session_id=session_id, builder=builder)

    settings = GatewaySettings(
        workspace=root, redis_url=stack.url, keepalive_s=0.5, keys_file=keys.path
    )
    servers = [
        ThreadedServer(create_app(settings, factory=factory, **distributed_parts(stack.url)))
        for _ in range(2)
    ]
    for server in servers:
        server.start()
    yield stack, root, [s.url for s in servers], made
    for server in servers:
        server.stop()


def tenant_client(key: dict[str, str], url: str, tenant: str) -> httpx.Client:
    auth = {"Authorization": f"Bearer {key[tenant]}"}
    return httpx.Client(base_url=url, timeout=60, headers=auth)


def test_two_tenants_on_two_replicas_and_real_workers(
    fleet: tuple[Stack, Path, list[str], dict[str, str]],
) -> None:
    stack, root, (first, second), key = fleet

    client = functools.partial(tenant_client, key)

    with (
        client(first, "acme") as a1,
        client(second, "acme") as a2,
        client(second, "globex") as b2,
    ):
        made = a1.post("/v1/sessions", json={"config": CONFIG, "session_id": "same"})
        assert made.status_code == 201, made.text

        # The other replica recovers it for its tenant only, whatever id the other names.
        for sid in ("same", "acme~same"):
            assert b2.get(f"/v1/sessions/{sid}/tools").status_code == 404
        assert a2.get("/v1/sessions/same/tools").status_code == 200, "recovered for acme"

        # globex's "same" is a new session of its own, not acme's recovered (no fixation).
        own = b2.post("/v1/sessions", json={"config": CONFIG, "session_id": "same"})
        assert own.status_code == 201 and own.json()["created"], own.text
        store, _ = shared_backend(Settings.from_env(stack.url))
        assert store.has_session("acme~same") and store.has_session("globex~same")
        assert not store.has_session("same")

        # Calls run on the workers, each in its own tenant's workspace.
        for c, text in ((a2, "from acme"), (b2, "from globex")):
            write = {"name": "write_file", "arguments": {"path": "note.txt", "content": text}}
            wrote = c.post("/v1/sessions/same/calls", json=write)
            assert wrote.json()["error"] is None, wrote.text
        assert (root / "tenants" / "acme" / "note.txt").read_text() == "from acme"
        assert (root / "tenants" / "globex" / "note.txt").read_text() == "from globex"

        ticks = {"name": "ticks", "arguments": {"n": 3}, "call_id": "a-ticks"}
        assert a1.post("/v1/sessions/same/calls", json=ticks).json()["error"] is None
        # Read from Redis by the replica that did not run it: acme's, and only acme's.
        record = a2.get("/v1/sessions/same/calls/a-ticks")
        assert record.status_code == 200 and record.json()["session_id"] == "same"
        assert len(sse_events(a2.get("/v1/sessions/same/calls/a-ticks/events").text)) == 4
        for answer in (
            b2.get("/v1/sessions/same/calls/a-ticks"),
            b2.get("/v1/sessions/same/calls/a-ticks/events"),
            b2.delete("/v1/sessions/same/calls/a-ticks"),
        ):
            assert answer.status_code == 404, answer.text
            assert answer.json() == {"detail": "session 'same' has no call 'a-ticks'"}

        # A running call of acme's: globex cannot cancel it, acme can, from either replica.
        sleep = {"name": "sleeper", "arguments": {"seconds": 60}, "call_id": "a-sleep"}
        with a1.stream(
            "POST", "/v1/sessions/same/calls", json=sleep, headers={"Accept": "text/event-stream"}
        ) as running:
            lines = running.iter_lines()
            for line in lines:
                if line.startswith("event: progress"):
                    break
            assert b2.delete("/v1/sessions/same/calls/a-sleep").status_code == 404
            started = time.monotonic()
            cancelled = a2.delete("/v1/sessions/same/calls/a-sleep")
            assert cancelled.status_code == 202 and cancelled.json()["cancelled"] is True
            rest = "\n".join(lines)
        assert sse_events(rest + "\n\n")[-1]["data"]["error"]["kind"] == "cancelled"
        assert time.monotonic() - started < 30

        assert b2.delete("/v1/sessions/same").status_code == 204
        assert a2.get("/v1/sessions/same/tools").status_code == 200, "acme's is untouched"


def test_two_tenants_run_the_same_call_id_at_once_on_real_workers(
    fleet: tuple[Stack, Path, list[str], dict[str, str]],
) -> None:
    """The same client call id, from two tenants on two replicas at once: two calls on the
    workers, stored apart, each read back (by either replica) as the client's own."""
    stack, _, (first, second), key = fleet

    client = functools.partial(tenant_client, key)

    with (
        client(first, "acme") as a1,
        client(second, "acme") as a2,
        client(second, "globex") as b2,
        client(first, "globex") as b1,
    ):
        for c in (a1, b2):
            made = c.post("/v1/sessions", json={"config": CONFIG, "session_id": "same"})
            assert made.status_code == 201, made.text
        slow = {"name": "ticks", "arguments": {"n": 3, "delay_ms": 1000}, "call_id": "c-same"}
        with a1.stream(
            "POST", "/v1/sessions/same/calls", json=slow, headers={"Accept": "text/event-stream"}
        ) as running:
            lines = running.iter_lines()
            for line in lines:
                if line.startswith("event: progress"):
                    break
            quick = {"name": "ticks", "arguments": {"n": 1}, "call_id": "c-same"}
            own = b2.post("/v1/sessions/same/calls", json=quick)
            assert own.status_code == 200, own.text
            assert own.json()["error"] is None and own.json()["call_id"] == "c-same", own.text
            assert own.json()["output"]["value"]["total"] == 1
            rest = "\n".join(lines)
        result = sse_events(rest + "\n\n")[-1]["data"]
        assert result["error"] is None and result["call_id"] == "c-same", result
        assert result["output"]["value"]["total"] == 3

        store, _ = shared_backend(Settings.from_env(stack.url))
        assert store.get_record("acme~same/c-same")["session_id"] == "acme~same"
        assert store.get_record("globex~same/c-same")["session_id"] == "globex~same"
        assert store.get_record("c-same") is None
        # Read back by the replica that did not run it, under the client's ids only.
        for c, total in ((a2, 3), (b1, 1)):
            record = c.get("/v1/sessions/same/calls/c-same").json()
            assert record["session_id"] == "same" and record["status"] == "succeeded", record
            assert record["result"]["call_id"] == "c-same"
            assert record["result"]["output"]["value"]["total"] == total
            events = sse_events(c.get("/v1/sessions/same/calls/c-same/events").text)
            assert len(events) == total + 1
            assert events[-1]["data"]["call_id"] == "c-same"
