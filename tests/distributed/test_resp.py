"""The bare pub/sub connection reads in a process whose descriptors run past 1,024 (a worker
with hundreds of commands; a reconnect then gets a high-numbered socket), where ``select``
refuses to wait; it authenticates to a Redis with a password, and says so when it cannot."""

from __future__ import annotations

import os
import resource
import time

import pytest
from redis import Redis

from toolhub.distributed.resp import PubSubConnection, RespError
from toolhub.stack import RedisServer


def test_a_high_numbered_socket_still_reads(live, store) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip("cannot open 1,100 descriptors here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    conn = PubSubConnection(live.redis.url)
    try:
        assert conn._sock.fileno() > 1024
        assert _receives(conn, store.client, "resp-test")
    finally:
        conn.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_it_authenticates_and_a_wrong_password_is_a_clear_error(tmp_path) -> None:
    server = RedisServer(data_dir=tmp_path / "redis", password="s3cret pass")
    server.start()
    try:
        conn = PubSubConnection(server.url)
        try:
            assert _receives(conn, Redis.from_url(server.url), "auth-test")
        finally:
            conn.close()
        with pytest.raises(RespError, match="AUTH failed"):
            PubSubConnection(server.url.replace("s3cret%20pass", "wrong"))
    finally:
        server.stop()


def _receives(conn: PubSubConnection, publisher: Redis, channel: str) -> bool:
    """Subscribe ``conn`` to ``channel``, publish "hello" there; whether ``conn`` read it
    within 2 s."""
    conn.send("SUBSCRIBE", channel)
    assert conn.read(2.0)[0][0] in (b"subscribe", "subscribe")
    publisher.publish(channel, "hello")
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        got = conn.read(0.2)
        if got:
            return got[0][2] in (b"hello", "hello")
    return False
