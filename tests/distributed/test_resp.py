"""The bare pub/sub connection reads in a process whose descriptors run past 1,024 (a worker
with hundreds of commands; a reconnect then gets a high-numbered socket), where ``select``
refuses to wait."""

from __future__ import annotations

import os
import resource
import time

import pytest

from toolhub.distributed.resp import PubSubConnection


def test_a_high_numbered_socket_still_reads(live, store) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip("cannot open 1,100 descriptors here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    conn = PubSubConnection(live.redis.url)
    try:
        assert conn._sock.fileno() > 1024
        conn.send("SUBSCRIBE", "resp-test")
        assert conn.read(2.0)[0][0] in (b"subscribe", "subscribe")
        store.client.publish("resp-test", "hello")
        deadline = time.monotonic() + 2
        got: list = []
        while not got and time.monotonic() < deadline:
            got = conn.read(0.2)
        assert got and got[0][2] in (b"hello", "hello")
    finally:
        conn.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
