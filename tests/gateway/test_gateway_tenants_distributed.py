"""Two tenants on two gateway replicas in front of the real distributed stack (redis-server and
``toolhub worker`` processes): a replica recovers a session another created only for the
session's own tenant, through the tenant-scoped id; both tenants may use the same session id,
and their calls run on the workers in separate workspaces; one tenant's call records, events
and cancels are out of the other's reach even from a session of the same id."""

from __future__ import annotations

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
    builder = ToolSetBuilder(plugins=False).register(*TOOLS)

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


def test_two_tenants_on_two_replicas_and_real_workers(
    fleet: tuple[Stack, Path, list[str], dict[str, str]],
) -> None:
    stack, root, (first, second), key = fleet

    def client(url: str, tenant: str) -> httpx.Client:
        auth = {"Authorization": f"Bearer {key[tenant]}"}
        return httpx.Client(base_url=url, timeout=60, headers=auth)

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
