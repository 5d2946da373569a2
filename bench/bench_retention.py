"""What a finished call leaves in Redis, against the same data written raw.

    .venv/bin/python bench/bench_retention.py [--calls 300]

Starts a redis-server and two ``toolhub worker`` processes, runs ``--calls`` sequential no-op
calls, then measures what each finished call keeps until its record TTL: ``MEMORY USAGE`` of
its record hash and its event stream (Redis's own accounting, per key, including overhead),
and the growth of ``used_memory`` over the run divided by the calls. The baseline is the
smallest honest store of the same answer: the result bytes alone as a plain string key. The
target is <= 2 KB per finished no-op call, on toolhub's own Redis settings (``toolhub up``,
the test stack: compact hashes up to 1 KB values) and on stock ones; the record TTL stays
configurable (``TOOLHUB_RECORD_TTL_SECONDS``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.distributed.plugin_tools import CONFIG, make_builder  # noqa: E402
from tests.fixtures_stack import STACK_ENV, Stack  # noqa: E402
from toolhub import Session  # noqa: E402

TARGET_BYTES = 2048


async def run_calls(session: Session, n: int, tag: str = "ret") -> list[str]:
    ids = []
    for i in range(n):
        cid = f"{tag}-{i}"
        result = await session.call("noop", {}, call_id=cid)
        assert not result.is_error, result.prompt_text
        ids.append(cid)
    return ids


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    import os

    os.environ.update(STACK_ENV)
    stack = Stack(workers=2).start()
    workspace = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    session = Session.connect(stack.url, CONFIG, workspace, builder=make_builder())
    try:
        asyncio.run(run_calls(session, 20))  # warm: tool-set caches, scripts loaded
        client = session.executor.store.client
        keys = session.executor.store.keys
        before = int(client.info("memory")["used_memory"])
        ids = asyncio.run(run_calls(session, args.calls))
        after = int(client.info("memory")["used_memory"])
        record = [int(client.memory_usage(keys.call(c), samples=0) or 0) for c in ids]
        events = [int(client.memory_usage(keys.events(c), samples=0) or 0) for c in ids]
        raw = []
        for cid in ids:
            result = client.hget(keys.call(cid), "result") or b""
            client.set(f"bench:raw:{cid}", result)
            raw.append(int(client.memory_usage(f"bench:raw:{cid}", samples=0)))
        pending = client.zcard(keys.pending)
        # The same calls on a Redis with stock hash settings (users' own servers).
        client.config_set("hash-max-ziplist-value", 64)
        stock_ids = asyncio.run(run_calls(session, 50, "stock"))
        stock = [int(client.memory_usage(keys.call(c), samples=0) or 0) for c in stock_ids]
    finally:
        session.close()
        stack.stop()
    per_key = statistics.median(record) + statistics.median(events)
    growth = (after - before) / args.calls
    stock_bytes = statistics.median(stock)
    verdict = "PASS" if max(per_key, stock_bytes) <= TARGET_BYTES else "MISS"
    print("| measure | toolhub | raw result string | target | verdict |")
    print("|---|---|---|---|---|")
    print(
        f"| Redis bytes per finished no-op call (record + stream, MEMORY USAGE median) "
        f"| {per_key:.0f} B | {statistics.median(raw):.0f} B | <= {TARGET_BYTES} B | {verdict} |"
    )
    print(
        f"| same, Redis with stock hash settings (64-byte values) | {stock_bytes:.0f} B | "
        f"| <= {TARGET_BYTES} B | |"
    )
    print(f"| of which record hash | {statistics.median(record):.0f} B | | | |")
    print(f"| of which event stream | {statistics.median(events):.0f} B | | | |")
    print(f"| used_memory growth per call | {growth:.0f} B | | | |")
    print(f"| entries left in the pending index | {pending} | | 0 | |")
    print(f"\n{args.calls} sequential no-op calls on 2 workers, loopback Redis.")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
