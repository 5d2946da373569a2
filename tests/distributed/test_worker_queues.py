"""What a worker waits on: two Redis lists per queue it serves, every queue's level-0 list
before any sunk one (fair dispatch, ``toolhub/distributed/fair.py``): Redis pops the first
non-empty list named, so a sunk message runs only when no level-0 message waits. kombu's
default four priority steps would name four lists per queue (twelve keys for the three
queues), every message paying for the longer command in kombu and in Redis."""

from __future__ import annotations

import shlex
import time

from redis import Redis

from toolhub.distributed.fair import SUNK_PRIORITY
from toolhub.distributed.settings import ALL_QUEUES


def test_a_worker_waits_on_each_of_its_queues_once(live):
    client = Redis.from_url(live.url, socket_timeout=5)
    seen: list[str] = []
    try:
        with client.monitor() as monitor:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not seen:
                command = monitor.next_command()["command"]
                if command.startswith("BRPOP "):
                    seen = shlex.split(command)[1:-1]  # the keys, then the timeout
    finally:
        client.close()
    level0, sunk = seen[: len(ALL_QUEUES)], seen[len(ALL_QUEUES) :]
    assert sorted(level0) == sorted(ALL_QUEUES)
    # MONITOR prints kombu's separator escaped (\x06\x16), shlex drops the backslashes; the
    # sunk lists come in the same order.
    assert sunk == [f"{queue}x06x16{SUNK_PRIORITY}" for queue in level0]
