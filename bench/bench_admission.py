"""The admission check's cost per call, inside the create-and-enqueue round trip.

    .venv/bin/python bench/bench_admission.py [--calls 2000] [--rounds 7]

Issue 38 decides each call's admission where it is queued: the tenant's quotas at the top of
``lua/create_and_enqueue.lua`` (before the record is created) and fair dispatch's bookkeeping
at its bottom (``toolhub/distributed/fair.py``). This bench runs, on a real redis-server, the
script as dispatchers run it today (keys and arguments from ``CallRecords
.create_and_enqueue_args``, every quota on, so whatever the admission adds is in) against the
same script before issue 38 (``admission_baseline.lua``: main at 89f0b47, with that commit's
keys and arguments), each on ``--calls`` fresh calls carrying a real captured Celery message, in
``--rounds`` interleaved rounds. Today's script runs for two tenants: one with nothing queued
(every call a new tenant) and one far past its fair share (every call sunk, its payload
rewritten).

The cost is Redis's own time per script (``INFO commandstats``, ``cmdstat_evalsha``), so the
client's pipelining weighs on no side. The machine's other load still does (Redis's clock runs
while it waits for a core): each side's figure is its least disturbed round, the minimum, as
load only ever adds to it; the median is printed beside it. Prints the admission check's cost
per call (today minus before, the worse tenant) against issue 38's target (<= 50 us), with a
PASS/MISS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redis import Redis  # noqa: E402

from toolhub.distributed.celery_app import EXECUTE_TASK, make_celery  # noqa: E402
from toolhub.distributed.codec import pack  # noqa: E402
from toolhub.distributed.enqueue import Enqueuer  # noqa: E402
from toolhub.distributed.lua import source  # noqa: E402
from toolhub.distributed.quota import QuotaLimits, quota_args  # noqa: E402
from toolhub.distributed.settings import Settings  # noqa: E402
from toolhub.distributed.store import RedisStore  # noqa: E402
from toolhub.stack import RedisServer  # noqa: E402

BASELINE = Path(__file__).with_name("admission_baseline.lua")
TARGET_US = 50.0
QUEUE = "toolhub.fast"
#: (keys, args) of one call, by its index.
CallArgs = Callable[[int], tuple[list[Any], list[Any]]]


def scripts(store: RedisStore) -> tuple[str, str]:
    """SHA of today's script and of the baseline, each after today's prelude."""
    today = store.records.scripts.create_and_enqueue.script
    text = today.decode() if isinstance(today, bytes) else today
    prelude = text[: -len(source("create_and_enqueue"))]
    return (
        store.client.script_load(text),
        store.client.script_load(prelude + BASELINE.read_text()),
    )


def server_us(client: Redis, sha: str, calls: int, call_args: CallArgs) -> float:
    """Redis's microseconds per run of ``sha`` over ``calls`` fresh calls."""
    client.flushdb()
    client.set(Settings().prefix + "config:h", "{}")
    client.config_resetstat()
    for start in range(0, calls, 200):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(calls, start + 200)):
            keys, args = call_args(i)
            pipe.evalsha(sha, len(keys), *keys, *args)
        replies = pipe.execute()
        assert all(r == 1 for r in replies), set(replies)
    stats: dict[str, Any] = client.info("commandstats")["cmdstat_evalsha"]
    return float(stats["usec_per_call"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    redis = RedisServer().start()
    try:
        settings = Settings.from_env(redis.url)
        store = RedisStore.from_settings(settings)
        today, before = scripts(store)
        enqueuer = Enqueuer(make_celery(settings))

        def fields(i: int, sid: str) -> tuple[dict[str, Any], bytes, bytes]:
            message = {"call_id": f"c{i}", "run_id": "r", "session_id": sid, "name": "noop"}
            captured = enqueuer.message(EXECUTE_TASK, QUEUE, message, repr(message))
            assert captured is not None, "kombu's publish could not be captured"
            record = {"session_id": sid, "name": "noop", "queue": QUEUE, "message": pack(message)}
            return record, *captured

        def todays(tenant: Callable[[int], str]) -> CallArgs:
            def call_args(i: int) -> tuple[list[Any], list[Any]]:
                sid = f"{tenant(i)}~s"
                record, key, payload = fields(i, sid)
                # Every quota on, at the defaults but for a rate and a concurrency no bench
                # call reaches: the checks run in full and admit.
                limits = QuotaLimits(tenant(i), 1e9, 10**9, 10**9, 10**9, 3600.0)
                quota, held = quota_args(
                    store.keys, limits, counted="calls", workload="command", hold_seconds=60
                )
                return store.records.create_and_enqueue_args(
                    f"c{i}",
                    "r",
                    {**record, **held},
                    key,
                    payload,
                    config_hash="h",
                    tenant=tenant(i),
                    quota=quota,
                )

            return call_args

        def baseline(i: int) -> tuple[list[Any], list[Any]]:
            keys, _ = todays(lambda _: "t")(i)
            record, _, payload = fields(i, "t~s")
            flat = [v for pair in record.items() for v in pair]
            head = [
                "r",
                settings.active_ttl_seconds,
                payload,
                settings.claim_deadline_seconds,
                f"c{i}",
                settings.session_ttl_seconds,
            ]
            return keys[:9], [*head, *flat]

        sides: dict[str, tuple[str, CallArgs]] = {
            "before issue 38 (admission_baseline.lua)": (before, baseline),
            "today, a tenant with nothing queued": (today, todays(lambda i: f"t{i}")),
            "today, a tenant far past its fair share": (today, todays(lambda _: "busy")),
        }
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for sha, call_args in sides.values():
            server_us(store.client, sha, 200, call_args)  # warm
        for _ in range(args.rounds):
            for name, (sha, call_args) in sides.items():
                samples[name].append(server_us(store.client, sha, args.calls, call_args))
        store.close()
    finally:
        redis.stop()

    best = {name: min(values) for name, values in samples.items()}
    print("| create-and-enqueue script | Redis time per call (least disturbed round) | median |")
    print("|---|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {best[name]:.2f} us | {statistics.median(values):.2f} us |")
    base = best["before issue 38 (admission_baseline.lua)"]
    cost = max(value - base for name, value in best.items() if name.startswith("today"))
    print(
        f"\n{args.calls} calls a side per round, {args.rounds} interleaved rounds, one "
        f"redis-server, {os.cpu_count()} CPUs.\n"
    )
    ok = cost <= TARGET_US
    print(
        f"admission check per call (today - before, the worse tenant): {cost:.2f} us; "
        f"target <= {TARGET_US:.0f} us: {'PASS' if ok else 'MISS'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
