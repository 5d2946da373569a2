"""What a full Redis (``maxmemory``, noeviction) refuses, checked on the real server (6.2 here:
no script ``allow-oom`` flag): a plain write and a script whose first write is deny-oom are
refused, while ``renew_many.lua`` (its first write a no-op ZREM) still renews every lease; a
refusal is told apart from a lost Redis (``is_full``) and a keeper sees the condition
(``FullRedis.probe``). The fleet-level scenario: tests/distributed/test_fault_redis_full.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from tests.distributed.helpers import queued_call
from tests.distributed.redis_fill import fill, unfill
from toolhub.distributed.redis_full import FullRedis, is_full
from toolhub.distributed.script_replies import RenewReply
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer


@pytest.fixture
def store() -> Iterator[RedisStore]:
    server = RedisServer().start()
    redis_store = RedisStore.from_settings(Settings.from_env(server.url))
    yield redis_store
    redis_store.close()
    server.stop()


def test_a_full_redis_refuses_writes_but_renewals_land(store: RedisStore, caplog) -> None:  # type: ignore[no-untyped-def]
    records = store.records
    claims = []
    for cid in ("oom-a", "oom-b"):
        message = queued_call(store, cid, b"test.oom")
        claims.append((cid, records.claim(message, "w:1").attempt))
    call = store.keys.call("oom-a")
    before = float(store.client.hget(call, "lease_until") or 0)
    url = store.client.connection_pool.connection_kwargs
    filler = fill(f"redis://{url['host']}:{url['port']}/0")
    try:
        with pytest.raises(RedisError) as plain:
            store.client.hset(call, "x", "1")
        assert is_full(plain.value)
        # A sweep's script whose first write is deny-oom is refused, and told apart.
        with pytest.raises(RedisError) as scripted:
            store.client.eval("redis.call('HSET', KEYS[1], 'x', '1') return 1", 1, call)
        assert is_full(scripted.value)
        assert not is_full(RedisConnectionError("Connection refused"))
        # The renewal lands.
        assert records.renew(claims) == [RenewReply.RENEWED, RenewReply.RENEWED]
        after = float(store.client.hget(call, "lease_until") or 0)
        assert after > before
        assert store.client.zscore(store.keys.leases, "oom-a") == pytest.approx(after)
        full = FullRedis(logging.getLogger("test.oom"), "keeper")
        with caplog.at_level(logging.ERROR, logger="test.oom"):
            assert full.probe(store.client) is True
            assert full.probe(store.client) is True
        assert len([r for r in caplog.records if "Redis is full" in r.getMessage()]) == 1
    finally:
        unfill(f"redis://{url['host']}:{url['port']}/0", filler)
    assert full.probe(store.client) is True  # free again, but not yet for SETTLE_S
