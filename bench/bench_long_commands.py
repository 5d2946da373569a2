"""Long commands at scale: two worker processes host hundreds of concurrent long-running
``bash`` calls, each printing a timestamped line a second, and the caller's progress latency and
the workers' memory per in-flight call are measured.

    .venv/bin/python bench/bench_long_commands.py [--calls 500] [--seconds 20] [--per-worker 256]

A waiting foreground command holds one worker thread (the call's) and one reader thread (its
output pipe) in the worker, and nothing else: no process, no connection of its own. So the cap
is ``--concurrency`` (threads, cheap to raise: ``toolhub worker --concurrency 256``), and this
bench runs with it raised. The commands run in the default sandbox (bwrap), as on any worker:
one shared sandbox per session per worker (docs/sandbox.md), whose own processes (bwrap and
the launcher) are reported apart.

Progress latency is the caller's receipt time minus the time the command printed in the line
(same host clock). The command forks nothing after its start (see ``one_call``). Memory per
in-flight call is the growth of the two workers' RSS (their own processes; the commands'
processes are not counted) from idle to the middle of the run, divided by the calls in
flight. Target (issue 18): progress p99 <= 50 ms.

The caller here is one process with 500 streams open, like a gateway: it freezes its heap
after the warm-up, as toolhub's own servers do once started (``toolhub/process_heap.py``), and
reports its own full garbage collections during the run, since each one holds every stream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fixtures_stack import STACK_ENV, Stack, WorkerProcess  # noqa: E402
from toolhub import CallResult, Progress, Session  # noqa: E402
from toolhub.process_heap import freeze_startup_heap  # noqa: E402

CONFIG = {"tools": [{"id": "Main:bash", "params": {"enabled_background": False}}]}
TARGET_P99_S = 0.050
STEADY_AFTER_S = 5.0
nan = float("nan")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss(pids: list[int]) -> int:
    return sum(psutil.Process(pid).memory_info().rss for pid in pids)


def sandbox_rss(pids: list[int]) -> tuple[int, int]:
    """How many processes the workers' shared sandboxes are (bwrap and the launcher inside;
    not the commands) and their RSS."""
    found = []
    for pid in pids:
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                argv = child.cmdline()
                if child.name() == "bwrap" or argv[1:4] == ["-I", "-S", "-c"]:
                    found.append(child.memory_info().rss)
    return len(found), sum(found)


async def one_call(session: Session, seconds: int, latencies: list[tuple[float, float]]) -> bool:
    # Fork-free after the start (bash's $EPOCHREALTIME and a read timeout on an idle pipe), so
    # what is measured is toolhub's cost of hosting the commands, not 1,000 forks a second.
    command = (
        f"exec 3<> <(:); for ((i = 0; i < {seconds}; i++)); do echo $EPOCHREALTIME; "
        "read -t 1 -u 3; done"
    )
    args = {"command": command, "description": "ticks", "timeout": 600_000}
    pending = ""
    async for item in session.stream("bash", args, timeout=seconds * 10 + 120):
        if isinstance(item, CallResult):
            if item.is_error:
                print(f"call failed: {item.prompt_text[:300]}", file=sys.stderr)
            return not item.is_error
        delta = item.payload.get("delta") if isinstance(item, Progress) else None
        if not isinstance(delta, str):
            continue
        now = time.time()
        pending += delta
        *lines, pending = pending.split("\n")
        for line in lines:
            with contextlib.suppress(ValueError):  # a line the command did not print whole
                printed = float(line)
                latencies.append((printed, now - printed))
    return False


async def run(session: Session, calls: int, seconds: int, pids: list[int]) -> dict[str, float]:
    latencies: list[tuple[float, float]] = []
    idle = rss(pids)
    started, wall = time.monotonic(), time.time()
    tasks = [asyncio.ensure_future(one_call(session, seconds, latencies)) for _ in range(calls)]
    await asyncio.sleep(seconds / 2)
    in_flight = sum(not t.done() for t in tasks)
    loaded = rss(pids)
    sandboxes, sandboxes_rss = sandbox_rss(pids)
    ok = await asyncio.gather(*tasks)
    every = [lag for _, lag in latencies]
    #: Lines printed once every command has started (the starts are a burst of 500 sandboxes).
    steady = [lag for printed, lag in latencies if printed >= wall + STEADY_AFTER_S] or [nan]
    return {
        "ok": sum(ok),
        "elapsed": time.monotonic() - started,
        "in_flight": in_flight,
        "idle_rss": idle,
        "loaded_rss": loaded,
        "sandboxes": sandboxes,
        "sandboxes_rss": sandboxes_rss,
        "p50": pct(every, 0.5) if every else nan,
        "p99": pct(every, 0.99) if every else nan,
        "steady_p99": pct(steady, 0.99),
        "lines": len(every),
    }


class FullCollections:
    """The caller's own generation-2 collections while installed, and the longest."""

    def __init__(self) -> None:
        self.count, self.longest, self._started = 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count += 1
            self.longest = max(self.longest, time.perf_counter() - self._started)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--per-worker", type=int, default=256)
    args = parser.parse_args()

    # The production lease, for the dispatcher here and (through ``env``: STACK_ENV's short
    # test lease would win over this process's environment) for the workers.
    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    os.environ.update({**STACK_ENV, **production})
    stack = Stack(workers=0)
    stack.workers = [
        WorkerProcess(
            f"w{i + 1}", stack.redis.url, stack.home, concurrency=args.per_worker, env=production
        )
        for i in range(2)
    ]
    stack.start()
    workspace = Path(tempfile.mkdtemp(prefix="bench-long-"))
    session = None
    try:
        session = Session.connect(stack.url, CONFIG, workspace)
        asyncio.run(run(session, 4, 2, [w.pid for w in stack.workers]))  # warm up
        frozen = freeze_startup_heap()
        collections = FullCollections()
        gc.callbacks.append(collections)
        got = asyncio.run(run(session, args.calls, args.seconds, [w.pid for w in stack.workers]))
        gc.callbacks.remove(collections)
        if got["ok"] != args.calls:
            print(stack.logs(), file=sys.stderr)
    finally:
        if session is not None:
            session.close()
        stack.stop()
    per_call = (got["loaded_rss"] - got["idle_rss"]) / max(got["in_flight"], 1)
    # Every line must arrive: a fast p99 over the lines that did is no pass.
    expected = args.calls * args.seconds
    whole = got["ok"] == args.calls and got["lines"] == expected
    verdict = "PASS" if got["p99"] <= TARGET_P99_S and whole else "MISS"
    shape = f"{args.calls} calls x {args.seconds} s, 2 workers x {args.per_worker}"
    print(f"| measure ({shape}) | value |")
    print("|---|---|")
    print(f"| calls succeeded | {got['ok']:.0f} of {args.calls} |")
    print(f"| in flight at mid-run | {got['in_flight']:.0f} |")
    print(f"| wall time | {got['elapsed']:.1f} s |")
    print(f"| progress lines received | {got['lines']:.0f} of {expected} |")
    print(f"| progress latency p50 | {got['p50'] * 1000:.1f} ms |")
    print(f"| progress latency p99 (target <= 50 ms) | {got['p99'] * 1000:.1f} ms: {verdict} |")
    print(
        f"| progress latency p99, lines printed {STEADY_AFTER_S:.0f} s after the start "
        f"| {got['steady_p99'] * 1000:.1f} ms |"
    )
    print(
        f"| worker RSS idle -> mid-run (both) | {got['idle_rss'] / 2**20:.0f} MiB -> "
        f"{got['loaded_rss'] / 2**20:.0f} MiB |"
    )
    print(f"| worker memory per in-flight call | {per_call / 1024:.0f} KiB |")
    print(
        f"| the session's shared sandboxes (bwrap and launcher, both workers) | "
        f"{got['sandboxes']:.0f} processes, {got['sandboxes_rss'] / 2**20:.1f} MiB "
        f"({got['sandboxes_rss'] / max(got['in_flight'], 1) / 1024:.0f} KiB per call) |"
    )
    print(
        f"| the caller's full garbage collections during the run (heap of {frozen} objects "
        f"frozen after the warm-up) | {collections.count}, longest "
        f"{collections.longest * 1000:.1f} ms |"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
