"""What a worker waits on: three Redis lists per queue it serves, every queue's level-0 list
before any over one, and those before any sunk one (fair dispatch,
``toolhub/distributed/fair.py``): Redis pops the first non-empty list named, so an over message
runs only when no level-0 message waits, and a sunk one only when neither does. kombu's default
four priority steps would name four lists per queue (twelve keys for the three queues), every
message paying for the longer command in kombu and in Redis."""

from __future__ import annotations

import shlex
import time

from redis import Redis

from toolhub.distributed.fair import OVER_PRIORITY, SUNK_PRIORITY
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
    n = len(ALL_QUEUES)
    level0, over, sunk = seen[:n], seen[n : 2 * n], seen[2 * n :]
    assert sorted(level0) == sorted(ALL_QUEUES)
    # MONITOR prints kombu's separator escaped (\x06\x16), shlex drops the backslashes; the
    # over and sunk lists come in the same order.
    assert over == [f"{queue}x06x16{OVER_PRIORITY}" for queue in level0]
    assert sunk == [f"{queue}x06x16{SUNK_PRIORITY}" for queue in level0]
