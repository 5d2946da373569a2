"""What a tenant's quota check adds to a dispatch: the ``create_and_enqueue`` script with no
quota against the same script with every quota on (token bucket, calls in flight, command
CPU-seconds per hour with both usage hashes present), on a real redis-server.

    .venv/bin/python bench/bench_quota_cost.py [--calls 20000] [--rounds 5]

Measured where the check runs: Redis's own time per ``EVALSHA`` (``INFO commandstats``,
``usec``), so the figure is the check's cost, not the client's or the network's; both
variants run in alternating blocks of 500 fresh calls, and the median of the rounds is
reported. The quotas
never refuse (their limits are far above the run), so every call does the whole check and
its writes; the set of calls in flight grows to ``--calls`` entries (none finishes), more
than any tenant holds. Target (issue 38): the difference <= 50 us per call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redis import Redis  # noqa: E402

from toolhub.distributed.quota import QuotaLimits, quota_args  # noqa: E402
from toolhub.distributed.records import CallRecords  # noqa: E402
from toolhub.distributed.settings import Settings  # noqa: E402
from toolhub.stack import RedisServer  # noqa: E402

TARGET_US = 50.0
QUEUE = b"bench.quota"
MESSAGE = b"x" * 600  # about a Celery message's size
LIMITS = QuotaLimits(
    "bench",
    calls_per_second=1e9,
    burst=10**9,
    concurrent_calls=10**9,
    cpu_seconds_per_hour=1e12,
)


BLOCK = 500


def block(client: Redis, records: CallRecords, tag: str, at: int, quotas: bool) -> float:
    """Redis's total microseconds of ``BLOCK`` fresh calls' ``create_and_enqueue``."""
    quota, held = quota_args(
        records.keys,
        LIMITS if quotas else None,
        counted="calls",
        workload="command",
        hold_seconds=3600,
    )
    fields = {"session_id": "s", "tool": "Main:bash", "name": "bash", "queue": "q", **held}
    script = records.scripts.create_and_enqueue
    client.config_resetstat()
    pipe = client.pipeline(transaction=False)
    for i in range(at, at + BLOCK):
        keys, args = records.create_and_enqueue_args(
            f"{tag}-{i}", "r", fields, QUEUE, MESSAGE, config_hash="h", quota=quota
        )
        script(keys=keys, args=args, client=pipe)
    pipe.execute()
    stats: dict[str, Any] = client.info("commandstats")
    return float(stats["cmdstat_evalsha"]["usec"])


def run(client: Redis, records: CallRecords, calls: int) -> tuple[float, float]:
    """Microseconds per call without and with quotas, in alternating blocks (so a busy
    machine's slow spells fall on both alike)."""
    plain = checked = 0.0
    for at in range(0, calls, BLOCK):
        plain += block(client, records, "p", at, quotas=False)
        checked += block(client, records, "q", at, quotas=True)
        client.delete(QUEUE)
    return plain / calls, checked / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    server = RedisServer().start()
    try:
        client = Redis.from_url(server.url)
        records = CallRecords(client, Settings.from_env(server.url))
        client.set(records.keys.config("h"), "{}")
        hour = int(time.time() // 3600)
        for h in (hour - 1, hour):
            client.hset(f"{records.keys.prefix}usage:bench:{h}", "cpu_seconds", 12.5)
        script = records.scripts.create_and_enqueue
        script(
            *records.create_and_enqueue_args(
                "w", "r", {"session_id": "s"}, QUEUE, b"w", config_hash="h"
            )
        )
        plain, checked = [], []
        for _ in range(opts.rounds):
            without, with_quotas = run(client, records, opts.calls)
            plain.append(without)
            checked.append(with_quotas)
            client.flushdb()
            client.set(records.keys.config("h"), "{}")
            for h in (hour - 1, hour):
                client.hset(f"{records.keys.prefix}usage:bench:{h}", "cpu_seconds", 12.5)
        base, full = statistics.median(plain), statistics.median(checked)
        print(f"create_and_enqueue, Redis time per call ({opts.calls} calls x {opts.rounds})")
        print(f"  no quota:          {base:7.2f} us   rounds {[round(x, 2) for x in plain]}")
        print(f"  every quota on:    {full:7.2f} us   rounds {[round(x, 2) for x in checked]}")
        added = full - base
        verdict = "ok" if added <= TARGET_US else "MISS"
        print(f"  added by quotas:   {added:7.2f} us   target <= {TARGET_US:.0f} us: {verdict}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
