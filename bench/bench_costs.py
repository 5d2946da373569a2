"""How cost grows with the work: tool-set size, the number of sessions a worker serves, and
the background tasks a session ran before.

    .venv/bin/python bench/bench_costs.py [--sessions 1,100,1000]

* ``definitions()`` (OpenAI format, plain and strict), a tool set's build, and per-call
  ``prepare`` of a built-in and of an external tool, at 24 tools (the default set), 100 and
  500 (the default set plus external tools, as a session with many MCP servers has). The
  baseline in the same run is pydantic's own ``model_validate`` of the same arguments, the
  least any validating dispatcher pays. Target: ``prepare`` stays flat (a lookup, then the one
  tool's validator): at 500 tools within 1.5x of its cost at 24.
* A real worker's memory after serving 1, 100 and 1,000 sessions with distinct configs (each
  a 24-tool set with its own description override), one call each. The worker keeps
  ``TOOLHUB_WORKER_SESSIONS`` (256) tool sets, least recently used out: memory must stop
  growing past the bound. Target: RSS after 1,000 sessions at most what 256 cost plus 10%.
* A ``read_file`` call, and the start of one more background command, on a real worker in a
  session that ran 0, 10 and 100 background commands before (all finished and reported).
  Every call ends with the task-completion reminder, and a start names the session's running
  tasks; the baseline is the session with none. Target: after 100, both within 1.5x.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fixtures_stack import STACK_ENV, Stack  # noqa: E402
from toolhub import Session, ToolSetBuilder  # noqa: E402
from toolhub.tasks import BackgroundTasks  # noqa: E402
from toolhub.tools import CATALOG  # noqa: E402
from toolhub.tools.read_file import ReadFileArgs  # noqa: E402
from toolhub.toolset.external import ExternalSpec  # noqa: E402

SIZES = (24, 100, 500)
DEFAULT_IDS = [t.id for t in ToolSetBuilder(CATALOG).build().config.tools]
CAPACITY = 256
READ = {"path": "a.txt", "limit": 10}
#: Background tasks a session ran before the timed calls; the first is the in-run baseline.
HISTORY = (0, 10, 100)
HISTORY_CALLS = 100
HISTORY_STARTS = 31


def per_call_us(fn: Callable[[], Any], *, seconds: float = 0.3) -> float:
    """Median of 5 timed batches, each about ``seconds / 5`` long, in microseconds."""
    fn()
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < 0.02:
        fn()
        n += 1
    batch = max(1, int(n * seconds / 5 / 0.02))
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t0) / batch * 1e6)
    return statistics.median(samples)


def external_specs(n: int) -> list[ExternalSpec]:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    }
    return [
        ExternalSpec(f"srv{i // 25}__tool{i}", f"External tool {i}.", schema, {"mcp": "x"})
        for i in range(n)
    ]


def _unused_handler(arguments: dict[str, Any], ctx: Any) -> Any:
    raise AssertionError("prepare only: nothing is executed")


def toolset_curve() -> list[dict[str, float]]:
    builder = ToolSetBuilder(CATALOG)
    rows = []
    for size in SIZES:
        specs = external_specs(size - 24)
        t0 = time.perf_counter()
        toolset = builder.build()
        for spec in specs:  # as an MCP server's tools arrive
            toolset.register_external(spec, _unused_handler)
        build_ms = (time.perf_counter() - t0) * 1000
        assert len(toolset.definitions()) == size, len(toolset.definitions())
        ext_name = specs[-1].name if specs else None
        rows.append(
            {
                "tools": size,
                "build_ms": build_ms,
                "definitions_us": per_call_us(toolset.definitions),
                "strict_us": per_call_us(lambda ts=toolset: ts.definitions(strict=True)),
                "prepare_us": per_call_us(lambda ts=toolset: ts.prepare("read_file", READ, "c")),
                "prepare_ext_us": (
                    per_call_us(lambda ts=toolset, n=ext_name: ts.prepare(n, {"query": "q"}, "c"))
                    if ext_name
                    else float("nan")
                ),
                "pydantic_us": per_call_us(lambda: ReadFileArgs.model_validate(READ)),
            }
        )
    return rows


def worker_curve(counts: list[int]) -> list[tuple[int, float, float]]:
    """(sessions served, worker RSS MiB, USS MiB) after each count, on one worker."""
    os.environ.update(STACK_ENV)
    os.environ.pop("TOOLHUB_PLUGINS", None)
    stack = Stack(workers=1).start()
    worker = psutil.Process(stack.workers[0].pid)
    ws = Path(tempfile.mkdtemp(prefix="bench-costs-"))
    (ws / "a.txt").write_text("hello\n")
    rows, served = [], 0

    async def serve(upto: int) -> None:
        nonlocal served
        while served < upto:
            config = {"tools": [{"id": "Main:read_file", "description": f"Read ({served})."}]}
            config["tools"] += [{"id": i} for i in DEFAULT_IDS if i != "Main:read_file"]
            session = Session.connect(stack.url, config, ws, session_id=f"cost-{served}")
            try:
                result = await session.call("read_file", {"path": "a.txt"})
                assert not result.is_error, result.prompt_text
            finally:
                session.close()
            served += 1

    try:
        for count in counts:
            asyncio.run(serve(count))
            time.sleep(0.5)
            info = worker.memory_full_info()
            rows.append((count, info.rss / 2**20, info.uss / 2**20))
    finally:
        stack.stop()
    return rows


def history_curve(counts: tuple[int, ...] = HISTORY) -> list[tuple[int, float, float]]:
    """(background tasks the session ran before, p50 ms of a ``read_file`` call, p50 ms of
    starting one more background command) on a real worker. Each call ends with the
    task-completion reminder and a start names the running tasks: both must read only what
    is not reported yet, so a long session's past tasks do not make every later call slower."""
    os.environ.update(STACK_ENV)
    os.environ.pop("TOOLHUB_PLUGINS", None)
    stack = Stack(workers=1).start()
    ws = Path(tempfile.mkdtemp(prefix="bench-history-"))
    (ws / "a.txt").write_text("hello\n")
    config = {"tools": [{"id": i} for i in DEFAULT_IDS]}
    loop = asyncio.new_event_loop()
    rows = []
    try:
        # A throwaway session first: the first background command starts the worker's
        # holder, which would otherwise land on the baseline.
        warm = Session.connect(stack.url, config, ws, session_id="history-warm-up")
        for args in (READ, {"command": "true", "description": "t", "is_background": True}):
            name = "read_file" if args is READ else "bash"
            assert not loop.run_until_complete(warm.call(name, args)).is_error
        warm.close()
        for count in counts:
            session = Session.connect(stack.url, config, ws, session_id=f"history-{count}")
            try:
                for i in range(count):
                    args = {"command": f"echo {i}", "description": "t", "is_background": True}
                    started = loop.run_until_complete(session.call("bash", args))
                    assert not started.is_error, started.prompt_text
                # Until every task finished and its completion was reported (the reminder
                # after each call does that).
                tasks = session.resources.get(BackgroundTasks)
                assert tasks is not None
                pause = {"command": "sleep 0.2", "description": "t"}
                while tasks.running(session.session_id) or tasks.unreported(session.session_id):
                    loop.run_until_complete(session.call("bash", pause))
                samples = []
                for _ in range(HISTORY_CALLS):
                    t0 = time.perf_counter()
                    result = loop.run_until_complete(session.call("read_file", READ))
                    samples.append(time.perf_counter() - t0)
                    assert not result.is_error, result.prompt_text
                starts = []
                for _ in range(HISTORY_STARTS):
                    args = {"command": "true", "description": "t", "is_background": True}
                    t0 = time.perf_counter()
                    started = loop.run_until_complete(session.call("bash", args))
                    starts.append(time.perf_counter() - t0)
                    assert not started.is_error, started.prompt_text
                rows.append(
                    (count, statistics.median(samples) * 1000, statistics.median(starts) * 1000)
                )
            finally:
                session.close()
    finally:
        loop.close()
        stack.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", default=f"1,100,{CAPACITY},1000")
    args = parser.parse_args()
    counts = sorted({int(c) for c in args.sessions.split(",")} | {CAPACITY})

    rows = toolset_curve()
    print(
        "| tools | build | definitions() | strict | prepare read_file | prepare external "
        "| pydantic validate (baseline) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['tools']:.0f} | {r['build_ms']:.1f} ms | {r['definitions_us']:.0f} us "
            f"| {r['strict_us']:.0f} us | {r['prepare_us']:.2f} us | {r['prepare_ext_us']:.2f} us "
            f"| {r['pydantic_us']:.2f} us |"
        )
    flat = rows[-1]["prepare_us"] / rows[0]["prepare_us"]
    verdict = "PASS" if flat <= 1.5 else "MISS"
    print(f"\ntarget prepare at 500 tools <= 1.5x its cost at 24: {verdict} ({flat:.2f}x)\n")

    worker = worker_curve(counts)
    print("| sessions served (distinct configs) | worker RSS | worker USS |")
    print("|---|---|---|")
    for count, rss, uss in worker:
        print(f"| {count} | {rss:.0f} MiB | {uss:.0f} MiB |")
    by_count = {c: rss for c, rss, _ in worker}
    first, at_cap, last = by_count[counts[0]], by_count[CAPACITY], by_count[counts[-1]]
    per_set = (at_cap - first) / max(CAPACITY - counts[0], 1) * 1024
    bounded = last <= at_cap * 1.10
    print(
        f"\nabout {per_set:.0f} KiB per cached tool set; cache bound {CAPACITY} "
        f"(TOOLHUB_WORKER_SESSIONS), least recently used out"
    )
    print(
        f"target RSS after {counts[-1]} sessions <= RSS at {CAPACITY} + 10%: "
        f"{'PASS' if bounded else 'MISS'} ({last:.0f} MiB vs {at_cap:.0f} MiB)"
    )

    history = history_curve()
    print(
        "\n| background tasks the session ran before | read_file p50 (worker, round trip) "
        "| starting one more background command, p50 |"
    )
    print("|---|---|---|")
    for count, p50, start in history:
        print(f"| {count} | {p50:.2f} ms | {start:.2f} ms |")
    growth = history[-1][1] / history[0][1]
    start_growth = history[-1][2] / history[0][2]
    steady = growth <= 1.5 and start_growth <= 1.5
    print(
        f"\ntarget a call after {history[-1][0]} finished background tasks <= 1.5x one after "
        f"none: {'PASS' if steady else 'MISS'} (read_file {growth:.2f}x, a background start "
        f"{start_growth:.2f}x)"
    )
    return 0 if verdict == "PASS" and bounded and steady else 1


if __name__ == "__main__":
    raise SystemExit(main())
