"""A backlog: 100,000 calls queued by one caller, then two workers draining it.

    .venv/bin/python bench/bench_backlog.py [--calls 100000] [--batch 100]

One redis-server; one caller enqueues ``--calls`` no-op calls as fast as it can (``--batch``
dispatches in flight at once: one pipeline a loop turn, ``dispatch_batch.py``), with no worker
running, so every call waits in the queue, far past its claim deadline (half a lease: 7.5 s).
Then two ``toolhub worker`` processes (threads, concurrency 4, production lease of 15 s) drain
it, their lease keepers sweeping all along and their promoters feeding the queue from its
backlog (the calls past the sunk list's window wait there as ids: ``backlog.py``). The caller
only dispatches (the dispatch half of ``Session.call``: the record and its message in one
script); nobody follows the results.

Prints, with targets (issue 43):

* enqueue latency p50/p99 over the first 1,000 calls and over the last 1,000 (printed);
* Redis bytes per queued call: ``used_memory`` growth over the enqueue / calls (<= 1 KB);
* drain rate over the first tenth of the backlog and over the last tenth (end >= 0.9x start);
* calls copied by the claim-deadline sweep (a fresh message pushed for a call whose message
  was in fact still queued): the records' ``requeued`` count and the workers' logs (0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from redis import Redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.distributed.plugin_tools import CONFIG, make_builder  # noqa: E402
from tests.fixtures_stack import STACK_ENV, WorkerProcess  # noqa: E402
from toolhub import CallResult, Session  # noqa: E402
from toolhub.stack import RedisServer  # noqa: E402


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def enqueue(session: Session, cid: str) -> float:
    """The dispatch half of ``Session.call`` (there is no public fire-and-forget call):
    prepare, write the record and push the message, and leave without following."""
    executor = session.executor
    started = time.perf_counter()
    prepared = session._prepare("noop", {}, cid)
    assert not isinstance(prepared, CallResult), prepared.prompt_text
    subscription = executor.store.subscribe(cid)
    try:
        dispatched = await executor._dispatch(prepared, subscription)  # type: ignore[attr-defined]
    finally:
        subscription.close()
    assert dispatched is True or dispatched is False, dispatched
    return time.perf_counter() - started


async def enqueue_all(session: Session, n: int, batch: int) -> list[float]:
    latencies: list[float] = []
    for at in range(0, n, batch):
        latencies += await asyncio.gather(
            *(enqueue(session, f"b{i}") for i in range(at, min(n, at + batch)))
        )
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    n = args.calls
    tenth = max(1, n // 10)

    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    os.environ.update({**STACK_ENV, **production})
    home = Path(tempfile.mkdtemp(prefix="bench-backlog-"))
    redis = RedisServer(persistent=False, data_dir=home / "redis")
    redis.start()
    #: The sweep's scans can hold a long queue's Redis for seconds on a busy machine.
    client = Redis.from_url(redis.url, socket_timeout=300)
    workspace = Path(tempfile.mkdtemp(prefix="bench-backlog-ws-"))
    session = Session.connect(redis.url, CONFIG, workspace, builder=make_builder())
    workers = [WorkerProcess(f"w{i}", redis.url, home, env=production) for i in range(2)]
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(enqueue(session, "probe"))
        base = (client.hget("toolhub:call:probe", "queue") or b"toolhub.fast").decode()
        client.delete(*client.keys(base + "*"))
        memory0 = int(client.info("memory")["used_memory"])
        started = time.monotonic()
        latencies = loop.run_until_complete(enqueue_all(session, n, args.batch))
        enqueue_seconds = time.monotonic() - started
        memory1 = int(client.info("memory")["used_memory"])
        #: The queue and its priority lists (fair dispatch sinks a tenant's calls past its
        #: share into a lower level: ``fair.py``), and the queue's backlog of call ids past
        #: the sunk list's window (``backlog.py``).
        queues = [k for k in client.keys(base + "*") if client.type(k) == b"list"]
        queues.append(session.executor.store.keys.backlog(base).encode())
        queued = backlog(client, queues)
        for worker in workers:
            worker.start()
        marks: list[tuple[float, int]] = []  # (time, queue length)
        deadline = time.monotonic() + max(600.0, n / 20)
        while True:
            left = backlog(client, queues)
            marks.append((time.monotonic(), left))
            if left == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        copied = copies(client, n)
        # The probe's message was dropped on purpose (its queue emptied): its recovery is due.
        logged = sum(
            line.count("re-enqueued")
            for w in workers
            for line in w.log_path.read_text(errors="replace").splitlines()
            if "call probe:" not in line
        )
    finally:
        loop.close()
        session.close()
        for worker in workers:
            worker.stop()
        redis.stop()

    def rate(high: int, low: int) -> float:
        """Calls per second while the queue went from ``high`` to ``low`` left."""
        t0 = next(t for t, left in marks if left <= high)
        t1 = next(t for t, left in marks if left <= low)
        return (high - low) / max(t1 - t0, 1e-9)

    first, last = latencies[:1000], latencies[-1000:]
    start_rate = rate(queued - 1, queued - 1 - tenth) if queued > tenth else float("nan")
    end_rate = rate(tenth, 0) if queued > tenth else float("nan")
    per_call = (memory1 - memory0) / n
    print("| measure | value | target |")
    print("|---|---|---|")
    print(
        f"| enqueue p50 / p99, first 1,000 | {pct(first, 0.5) * 1e3:.2f} / "
        f"{pct(first, 0.99) * 1e3:.2f} ms | |"
    )
    print(
        f"| enqueue p50 / p99, last 1,000 (~{n:,} queued) | {pct(last, 0.5) * 1e3:.2f} / "
        f"{pct(last, 0.99) * 1e3:.2f} ms | |"
    )
    print(f"| enqueue p99, last / first | {pct(last, 0.99) / pct(first, 0.99):.2f}x | |")
    print(f"| enqueue rate, one caller | {n / enqueue_seconds:.0f} calls/s | |")
    print(f"| Redis bytes per queued call | {per_call:.0f} B | <= 1024 B |")
    print(
        f"| drain rate, first / last tenth | {start_rate:.0f} / {end_rate:.0f} calls/s "
        f"({end_rate / start_rate:.2f}x) | >= 0.9x |"
    )
    print(f"| calls copied by the claim-deadline sweep | {copied} (logged: {logged}) | 0 |")
    print(
        f"\n{n:,} no-op calls, batches of {args.batch} in flight, queued with no worker running "
        f"({queued:,} in the queue after {enqueue_seconds:.0f} s), then 2 workers x 4 threads, "
        f"lease 15 s (claim deadline 7.5 s); {os.cpu_count()} CPUs."
    )
    checks = (
        ("Redis bytes per queued call <= 1 KB", per_call <= 1024),
        ("drain rate at the end >= 0.9x the start", end_rate / start_rate >= 0.9),
        ("no call copied while it waited in the queue", copied == 0 and logged == 0),
    )
    for name, ok in checks:
        print(f"{name}: {'PASS' if ok else 'MISS'}")
    return 0 if all(ok for _, ok in checks) else 1


def backlog(client: Redis, queues: list[bytes]) -> int:
    return sum(int(client.llen(q)) for q in queues)


def copies(client: Redis, n: int) -> int:
    """Calls whose record counts a re-enqueue of an unclaimed message."""
    total = 0
    for at in range(0, n, 1000):
        pipe = client.pipeline(transaction=False)
        for i in range(at, min(n, at + 1000)):
            pipe.hget(f"toolhub:call:b{i}", "requeued")
        total += sum(1 for v in pipe.execute() if v and int(v) > 0)
    return total


if __name__ == "__main__":
    raise SystemExit(main())
