"""The floor of ``bench_cpu_per_call.py``: the least a Python worker on Redis can spend per call.

    .venv/bin/python bench/floor_worker.py REDIS_URL

One ``BRPOP`` of a message (``<id>|noop`` or ``<id>|bash``), the work (nothing, or
``bash -c true`` unsandboxed), one ``PUBLISH`` of the id on the reply channel. No framework, no
record, no lease, no validation: what toolhub adds to a call is measured against this.
"""

from __future__ import annotations

import subprocess
import sys

from redis import Redis

QUEUE = "floor:queue"
REPLIES = "floor:replies"


def main(url: str) -> None:
    client = Redis.from_url(url)
    while True:
        popped = client.brpop([QUEUE], timeout=1)
        if popped is None:
            continue
        call_id, _, kind = popped[1].partition(b"|")
        if kind == b"bash":
            subprocess.run(["bash", "-c", "true"], check=False)
        client.publish(REPLIES, call_id)


if __name__ == "__main__":
    main(sys.argv[1])
