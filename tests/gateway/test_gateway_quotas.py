"""Tenant quotas through the gateway, on two replicas in front of the real distributed stack
(redis-server and ``toolhub worker`` processes): a burst over the tenant's rate answers 429
with ``Retry-After`` and the typed ``rate_limited`` result, nothing of it recorded or queued,
and the call retried after ``retry_after`` runs; the two replicas take from one bucket; the
Python client raises ``RateLimited`` with ``retry_after`` and the quota; another tenant's calls
succeed meanwhile; slow calls in flight hold the concurrency quota until one ends."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed.plugin_tools import TOOLS
from tests.fixtures_stack import Stack, shared_stack
from toolhub import Session
from toolhub.distributed.settings import Settings
from toolhub.distributed.shared import shared_backend
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.client import GatewayClient, RateLimited
from toolhub.gateway.distributed import distributed_parts
from toolhub.tenancy import TenantQuotas, tenant_of_session
from toolhub.tenancy.keys import KeyFile
from toolhub.tools import CATALOG
from toolhub.toolset import ConfigSource, ToolSetBuilder

pytestmark = pytest.mark.timeout(180)

CONFIG = {"tools": [{"id": "Test:sleeper"}, {"id": "Main:write_file"}]}

Fleet = tuple[Stack, list[str], dict[str, str], str, str]


@pytest.fixture
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    """Two replicas on one Redis; a tenant held to 0.5 calls per second (burst 3), one held
    to 2 calls in flight, one with the defaults (their names new every test: the buckets
    live in the shared Redis)."""
    stack: Stack = shared_stack(request)
    suffix = os.urandom(3).hex()
    slow, narrow, free = f"slow-{suffix}", f"narrow-{suffix}", f"free-{suffix}"
    quotas = TenantQuotas(
        tenants={
            slow: {"calls_per_second": 0.5, "burst": 3},
            narrow: {"calls_per_second": None, "concurrent_calls": 2},
        }
    )
    keys = KeyFile(tmp_path / "keys.json")
    made = {tenant: keys.create(tenant)[1] for tenant in (slow, narrow, free)}
    builder = ToolSetBuilder(CATALOG, plugins=False).register(*TOOLS)

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        return Session.connect(
            stack.url,
            config,
            workspace,
            session_id=session_id,
            builder=builder,
            quotas=quotas.for_tenant(tenant_of_session(session_id)),
        )

    root = tmp_path / "root"
    root.mkdir()
    settings = GatewaySettings(
        workspace=root, redis_url=stack.url, keepalive_s=0.5, keys_file=keys.path
    )
    servers = [
        ThreadedServer(create_app(settings, factory=factory, **distributed_parts(stack.url)))
        for _ in range(2)
    ]
    for server in servers:
        server.start()
    yield stack, [s.url for s in servers], made, slow, narrow
    for server in servers:
        server.stop()


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"})


def _write(call_id: str) -> dict[str, object]:
    return {
        "name": "write_file",
        "arguments": {"path": f"{call_id}.txt", "content": "x"},
        "call_id": call_id,
    }


def test_a_burst_over_the_rate_answers_429_on_either_replica_and_queues_nothing(
    fleet: Fleet,
) -> None:
    stack, (first, second), key, slow, _ = fleet
    free = next(t for t in key if t.startswith("free-"))
    with (
        _client(first, key[slow]) as a1,
        _client(second, key[slow]) as a2,
        _client(second, key[free]) as b2,
    ):
        assert a1.post("/v1/sessions", json={"config": CONFIG, "session_id": "s"}).is_success
        assert b2.post("/v1/sessions", json={"config": CONFIG, "session_id": "s"}).is_success
        # The burst of 3, taken from one bucket by both replicas.
        for i, c in enumerate((a1, a2, a1)):
            done = c.post("/v1/sessions/s/calls", json=_write(f"ok{i}"))
            assert done.status_code == 200 and done.json()["error"] is None, done.text

        refused = a2.post("/v1/sessions/s/calls", json=_write("over"))
        assert refused.status_code == 429, refused.text
        retry = int(refused.headers["Retry-After"])
        assert 1 <= retry <= 2
        error = refused.json()["error"]
        assert error["kind"] == "rate_limited"
        details = error["details"]
        assert details["code"] == "quota_exceeded" and details["quota"] == "calls_per_second"
        assert details["limit"] == 0.5 and 0 < details["retry_after"] <= 2
        assert details["tenant"] == slow
        assert "retry after" in refused.json()["prompt_text"], "the model reads it"

        # Nothing recorded or queued for it.
        assert a1.get("/v1/sessions/s/calls/over").status_code == 404
        store, _ = shared_backend(Settings.from_env(stack.url))
        assert not store.client.keys(f"{store.keys.prefix}call:*over*")
        pending = [m.decode() for m in store.client.zrange(store.keys.pending, 0, -1)]
        assert not [m for m in pending if m.endswith("over")]

        # Another tenant's call goes through meanwhile.
        other = b2.post("/v1/sessions/s/calls", json=_write("theirs"))
        assert other.status_code == 200 and other.json()["error"] is None

        # The Python client raises the typed error (the bucket may have refilled a token
        # meanwhile: the burst goes on until it is refused).
        with GatewayClient(first, key[slow]) as api:
            with pytest.raises(RateLimited) as raised:
                for i in range(5):
                    api.call("s", "write_file", {"path": "p.txt", "content": "x"}, f"py{i}")
            assert raised.value.status == 429 and raised.value.quota == "calls_per_second"
            assert raised.value.retry_after is not None and 0 < raised.value.retry_after <= 2
            assert raised.value.error is not None and raised.value.error.kind == "rate_limited"

            # Retried after retry_after, it runs.
            time.sleep(raised.value.retry_after + 0.1)
            again = api.call("s", "write_file", {"path": "p.txt", "content": "x"}, "py-again")
            assert again["error"] is None


def test_slow_calls_in_flight_hold_the_concurrency_quota(fleet: Fleet) -> None:
    _, (first, second), key, _, narrow = fleet
    with _client(first, key[narrow]) as c1, _client(second, key[narrow]) as c2:
        assert c1.post("/v1/sessions", json={"config": CONFIG, "session_id": "s"}).is_success
        answers: dict[str, httpx.Response] = {}

        def sleep(client: httpx.Client, call_id: str) -> None:
            body = {"name": "sleeper", "arguments": {"seconds": 30}, "call_id": call_id}
            answers[call_id] = client.post("/v1/sessions/s/calls", json=body)

        sleepers = [
            threading.Thread(target=sleep, args=(c, cid))
            for c, cid in ((c1, "long1"), (c2, "long2"))
        ]
        for thread in sleepers:
            thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = [c1.get(f"/v1/sessions/s/calls/{cid}").status_code for cid in ("long1", "long2")]
            if seen == [200, 200]:
                break
            time.sleep(0.05)

        refused = c2.post("/v1/sessions/s/calls", json=_write("third"))
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["details"]["quota"] == "concurrent_calls"
        assert int(refused.headers["Retry-After"]) >= 1

        assert c2.delete("/v1/sessions/s/calls/long1").status_code == 202
        deadline = time.monotonic() + 30
        while True:
            third = c1.post("/v1/sessions/s/calls", json=_write("third"))
            if third.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert third.status_code == 200 and third.json()["error"] is None, third.text
        assert c1.delete("/v1/sessions/s/calls/long2").status_code == 202
        for thread in sleepers:
            thread.join(30)
        assert answers["long1"].json()["error"]["kind"] == "cancelled"
