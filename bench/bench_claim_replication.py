"""What a Sentinel fleet's claim costs to confirm on a replica, against one Redis round trip.

    .venv/bin/python bench/bench_claim_replication.py [--n 3000]

Starts a primary, a replica and three Sentinels (``tests/sentinel_set.py``), then times, on
the store's own Sentinel-managed client: ``ClaimReplication.confirm`` (one small write and
``WAIT 1`` in one pipeline: what every claim in a Sentinel fleet adds before its call runs),
and a ``PING`` (the baseline: one round trip). Target: the confirmation's p50 at most 4x a
round trip's (the write, the primary's replication to the replica and its acknowledgement).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.sentinel_set import SentinelSet  # noqa: E402
from toolhub.distributed.replication import ClaimReplication  # noqa: E402
from toolhub.distributed.store import connect  # noqa: E402

TARGET_RATIO = 4.0


def timed(n: int, step: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        out.append(time.perf_counter() - start)
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3000)
    n = parser.parse_args().n
    redis = SentinelSet(Path(tempfile.mkdtemp(prefix="toolhub-bench-wait-"))).start()
    try:
        client = connect(redis.url)
        wait = ClaimReplication(client, "bench:marker", 1, 500)
        assert wait.confirm("bench"), "the replica did not confirm"
        ping = timed(n, client.ping)
        confirm = timed(n, lambda: wait.confirm("bench"))
    finally:
        redis.stop()
    p50 = {name: t[len(t) // 2] * 1e6 for name, t in (("ping", ping), ("confirm", confirm))}
    p99 = {name: t[int(len(t) * 0.99)] * 1e6 for name, t in (("ping", ping), ("confirm", confirm))}
    print("| step | p50 µs | p99 µs |\n|---|---|---|")
    print(f"| PING (one round trip) | {p50['ping']:.0f} | {p99['ping']:.0f} |")
    print(f"| claim confirmed on a replica | {p50['confirm']:.0f} | {p99['confirm']:.0f} |")
    ratio = p50["confirm"] / p50["ping"]
    verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
    print(
        f"\n{verdict}: a claim's replica confirmation p50 {ratio:.1f}x a round trip "
        f"(target <= {TARGET_RATIO:g}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
