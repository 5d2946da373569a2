"""What a worker waits on: one Redis list per queue it serves. toolhub sends no priorities, so
its kombu channel has one priority step (``celery_app.py``); with kombu's default four, every
BRPOP named four lists per queue (twelve keys for the three queues), and every message paid
for the longer command in kombu and in Redis."""

from __future__ import annotations

import shlex
import time

from redis import Redis

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
    assert sorted(seen) == sorted(ALL_QUEUES)
