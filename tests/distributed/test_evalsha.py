"""``run_script`` and ``run_scripts`` against a real redis-server of their own: the replies
are the stock path's, and what the packed path cannot handle (a script Redis forgot, a
connection that broke) goes through redis-py's own path and still answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from redis.connection import AbstractConnection
from redis.exceptions import NoScriptError, ResponseError

from toolhub.distributed.evalsha import run_script, run_scripts
from toolhub.distributed.store import connect
from toolhub.stack import RedisServer

ECHO = "redis.call('SET', KEYS[1], ARGV[1]); return {KEYS[1], ARGV[1], tonumber(ARGV[2]) * 2}"
PICKY = "if ARGV[1] == 'bad' then return redis.error_reply('bad one') end; return ARGV[1]"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Redis]:
    server = RedisServer(data_dir=tmp_path / "redis")
    server.start()
    redis = connect(server.url)
    yield redis
    redis.close()
    server.stop()


def test_the_reply_is_the_stock_reply(client: Redis) -> None:
    script = client.register_script(ECHO)
    stock = script(keys=["k"], args=["v", 1.5])
    assert run_script(client, script, ["k"], ["v", 1.5]) == stock == [b"k", b"v", 3]
    assert client.get("k") == b"v"


def test_a_script_redis_does_not_know_is_loaded_and_run(client: Redis) -> None:
    script = client.register_script(ECHO)
    client.script_flush()
    assert run_script(client, script, ["k"], ["after flush", 2]) == [b"k", b"after flush", 4]
    # The connection the unknown script was tried on went back to the pool in a clean state.
    assert run_script(client, script, ["k"], ["again", 3]) == [b"k", b"again", 6]


def test_a_connection_broken_after_the_send_is_replaced_and_the_script_still_runs(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = client.register_script(ECHO)
    assert run_script(client, script, ["k"], ["first", 1])  # the pool holds a live connection
    reads = _break_read(monkeypatch, 1)  # the connection dies between the command and its reply
    assert run_script(client, script, ["k"], ["second", 5]) == [b"k", b"second", 10]
    assert len(reads) > 1 and client.get("k") == b"second"


def test_a_script_error_reaches_the_caller(client: Redis) -> None:
    script = client.register_script("return redis.error_reply('refused here')")
    with pytest.raises(ResponseError, match="refused here"):
        run_script(client, script, [], [])
    assert client.ping()


def test_a_batch_answers_each_call_in_order_with_its_own_error(client: Redis) -> None:
    script = client.register_script(PICKY)
    client.script_load(PICKY)
    replies = run_scripts(client, script, [([], ["a"]), ([], ["bad"]), ([], ["c"])])
    assert replies[0] == b"a" and replies[2] == b"c"
    assert isinstance(replies[1], ResponseError) and "bad one" in str(replies[1])
    client.script_flush()
    forgotten = run_scripts(client, script, [([], ["a"]), ([], ["c"])])
    assert [type(reply) for reply in forgotten] == [NoScriptError, NoScriptError]


def test_a_batch_whose_connection_breaks_goes_again_through_a_pipeline(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = client.register_script(ECHO)
    assert run_script(client, script, ["k0"], ["warm", 0])  # the pool holds a live connection
    _break_read(monkeypatch, 2)  # after the first reply of the batch
    calls = [([f"k{i}"], [f"v{i}", i]) for i in range(1, 4)]
    assert run_scripts(client, script, calls) == [
        [f"k{i}".encode(), f"v{i}".encode(), 2 * i] for i in range(1, 4)
    ]
    assert [client.get(f"k{i}") for i in range(1, 4)] == [b"v1", b"v2", b"v3"]


def _break_read(monkeypatch: pytest.MonkeyPatch, nth: int) -> list[int]:
    """Disconnect the connection just before the ``nth`` reply read from now on; returns the
    list that counts the reads."""
    read_response = AbstractConnection.read_response
    reads: list[int] = []

    def breaking(self: AbstractConnection, *args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        if len(reads) == nth:
            self.disconnect()
        return read_response(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "read_response", breaking)
    return reads
