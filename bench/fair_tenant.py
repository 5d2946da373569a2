"""One tenant of ``bench_fair.py``, in a process of its own (its own dispatcher, as a tenant
behind its own gateway would have), so the other tenant's dispatching never delays its clock.

    fair_tenant.py burst URL OUT --calls N     tenant A: N no-op calls at once
    fair_tenant.py steady URL OUT --stop FILE  tenant B: one no-op call every 50 ms until FILE

``burst`` writes {"start", "end", "calls", "errors"} (wall-clock seconds: the window of A's
burst); ``steady`` writes ``ready`` beside OUT once warm, then, when FILE appears, every call as
[sent at (wall clock), round trip (s), is_error]. B sends on a fixed 50 ms schedule, each call
its own task, so one slow call never delays the next one's start (no coordinated omission).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.distributed.plugin_tools import CONFIG, make_builder  # noqa: E402
from toolhub import Session  # noqa: E402

EVERY_S = 0.05


def _session(url: str, sid: str) -> Session:
    workspace = Path(tempfile.mkdtemp(prefix="bench-fair-"))
    return Session.connect(url, CONFIG, workspace, session_id=sid, builder=make_builder())


async def burst(session: Session, calls: int) -> dict[str, float]:
    await session.call("noop", {}, call_id="a-warm")
    start = time.time()
    results = await asyncio.gather(
        *(session.call("noop", {}, call_id=f"a{i}") for i in range(calls))
    )
    end = time.time()
    return {"start": start, "end": end, "calls": calls, "errors": sum(r.is_error for r in results)}


async def steady(session: Session, ready: Path, stop: Path) -> list[tuple[float, float, bool]]:
    async def one(i: int) -> tuple[float, float, bool]:
        sent, started = time.time(), time.perf_counter()
        result = await session.call("noop", {}, call_id=f"b{i}")
        return sent, time.perf_counter() - started, result.is_error

    for i in range(20):
        await one(-1 - i)
    ready.write_text("ready")
    tasks = []
    first = time.perf_counter()
    while not stop.exists():
        i = len(tasks)
        await asyncio.sleep(max(0.0, first + i * EVERY_S - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i)))
    return list(await asyncio.gather(*tasks))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["burst", "steady"])
    parser.add_argument("url")
    parser.add_argument("out", type=Path)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--stop", type=Path)
    args = parser.parse_args()
    if args.role == "burst":
        session = _session(args.url, "bench-a~burst")
        data: object = asyncio.run(burst(session, args.calls))
    else:
        assert args.stop is not None
        session = _session(args.url, "bench-b~steady")
        data = asyncio.run(steady(session, args.out.with_suffix(".ready"), args.stop))
    session.close()
    args.out.write_text(json.dumps(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
