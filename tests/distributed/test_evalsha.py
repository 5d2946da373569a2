"""``run_script`` and ``run_scripts`` against a real redis-server of their own: the replies
are the stock path's, and what the packed path cannot handle (a script Redis forgot, a
connection that broke) goes through redis-py's own path and still answers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from redis.commands.core import Script
from redis.connection import AbstractConnection
from redis.exceptions import NoScriptError, ResponseError

from toolhub.distributed.evalsha import hold_connections, run_script, run_scripts
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


Counted = tuple[Script, list[int], list[int]]


@pytest.fixture
def counted(client: Redis, monkeypatch: pytest.MonkeyPatch) -> Counted:
    """``ECHO``, loaded, and the pool's checkouts and releases, counted from now on."""
    client.script_load(ECHO)
    pool = client.connection_pool
    get, release = pool.get_connection, pool.release
    taken: list[int] = []
    given: list[int] = []

    def counted_get(*args: Any, **kwargs: Any) -> Any:
        taken.append(1)
        return get(*args, **kwargs)

    def counted_release(conn: Any) -> None:
        given.append(1)
        release(conn)

    monkeypatch.setattr(pool, "get_connection", counted_get)
    monkeypatch.setattr(pool, "release", counted_release)
    return client.register_script(ECHO), taken, given


def test_a_holding_thread_runs_every_script_on_one_connection(
    client: Redis, counted: Counted
) -> None:
    script, taken, given = counted
    replies = _holding(lambda: [run_script(client, script, ["k"], [f"v{i}", i]) for i in range(5)])
    assert replies == [[b"k", f"v{i}".encode(), 2 * i] for i in range(5)]
    assert (len(taken), len(given)) == (1, 0)  # checked out once, and kept
    run_script(client, script, ["k"], ["here", 1])  # a thread that does not hold: out and back
    assert (len(taken), len(given)) == (2, 1)
    assert client.get("k") == b"here"


def test_a_held_connection_that_breaks_is_given_back_and_the_next_script_runs(
    client: Redis, counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, taken, given = counted

    def scripts() -> list[Any]:
        replies = [run_script(client, script, ["k"], ["first", 1])]
        with monkeypatch.context() as patch:
            _break_read(patch, 1)  # the held connection dies between a command and its reply
            replies.append(run_script(client, script, ["k"], ["second", 2]))
        replies.append(run_script(client, script, ["k"], ["third", 3]))
        return replies

    assert _holding(scripts) == [
        [b"k", b"first", 2],
        [b"k", b"second", 4],
        [b"k", b"third", 6],
    ]
    # The broken one went back to the pool; the third script took a fresh one, and keeps it
    # (the stock path's retry of the second takes and gives back its own).
    assert len(given) == len(taken) - 1 and client.get("k") == b"third"


def _holding(work: Callable[[], Any]) -> Any:
    """``work()`` on a thread of its own that holds its connections (``hold_connections`` is
    per thread); its result, or its error raised here."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            hold_connections()
            out["result"] = work()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if "error" in out:
        raise out["error"]
    return out["result"]


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
