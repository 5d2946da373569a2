"""Where one sequential no-op call's time goes, phase by phase, next to raw Celery's.

    .venv/bin/python bench/bench_critical_path.py [--calls 300] [--rounds 3]

``bench_distributed.py`` says how toolhub's round trip compares with raw Celery's; this says
why. One ``toolhub worker`` and one raw Celery worker (threads pool, concurrency 4, the same
Redis) run with ``bench/critical_path`` on their ``PYTHONPATH``: its ``sitecustomize`` records
when a message enters each stage of the worker (the BRPOP reply read, the hand-off to the pool,
a pool thread taking it, the task function, and toolhub's finish or Celery's result store).
The caller records when it starts a call and when it has the result, and reads Redis's ``INFO
commandstats`` around each side's block of calls: what Redis ran per call, and for how long
(background work of each side, such as lease renewals, included). Calls are made one at a time,
toolhub and raw Celery in interleaved rounds, so each mark between a call's start and end
belongs to that call. Prints the median of every phase on both sides.

No target: this is the instrument behind the raw-Celery verdicts of ``bench_distributed.py``
(docs/benchmarks.md). A mark costs its worker a clock read and a list append.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from redis import Redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_distributed import Baseline  # noqa: E402
from tests.distributed.plugin_tools import CONFIG, make_builder  # noqa: E402
from tests.fixtures_stack import STACK_ENV, Stack  # noqa: E402
from toolhub import Session  # noqa: E402

SITE = REPO / "bench" / "critical_path"

#: (phase, toolhub's span, raw Celery's span or None); a span runs from one mark to the next,
#: "start" and "end" being the caller's.
PHASES = (
    (
        "caller: prepare and enqueue; the broker wakes the worker",
        ("start", "read"),
        ("start", "read"),
    ),
    ("Celery: read the message, strategy, task-received", ("read", "pool"), ("read", "pool")),
    ("Celery: hand-off to a pool thread", ("pool", "thread"), ("pool", "thread")),
    ("Celery: accept, tracer, up to the task function", ("thread", "body"), ("thread", "body")),
    (
        "the task: toolhub's signature check, claim, session, validation, the tool, its result",
        ("body", "finish"),
        ("body", "store"),
    ),
    (
        "the result: written, published, received",
        ("finish", "end"),
        ("store", "end"),
    ),
    ("whole call", ("start", "end"), ("start", "end")),
)


def read_marks(folder: Path, pid: int) -> list[tuple[float, str]]:
    path = folder / f"{pid}.marks"
    marks = []
    for line in path.read_text().splitlines():
        stamp, tag = line.split()
        marks.append((float(stamp), tag))
    return sorted(marks)


def phases_of(
    windows: list[tuple[float, float]], marks: list[tuple[float, str]]
) -> list[dict[str, float]]:
    """Per call: its start and end, and the first time of each worker mark inside them."""
    calls = []
    at = 0
    for start, end in windows:
        seen: dict[str, float] = {"start": start, "end": end}
        while at < len(marks) and marks[at][0] < start:
            at += 1
        j = at
        while j < len(marks) and marks[j][0] <= end:
            stamp, tag = marks[j]
            seen.setdefault(tag, stamp)
            j += 1
        calls.append(seen)
    return calls


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-marks-"))
    marked = {"PYTHONPATH": f"{SITE}{os.pathsep}{REPO}", "BENCH_PHASES": str(folder)}
    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    os.environ.update({**STACK_ENV, **production})
    stack = Stack(workers=1, env={**production, **marked}).start()
    os.environ["BENCH_REDIS_URL"] = stack.url
    baseline = Baseline(stack.url, stack.home, events=False, workers=1, env=marked)
    session = Session.connect(stack.url, CONFIG, Path(tempfile.mkdtemp()), builder=make_builder())
    windows: dict[str, list[tuple[float, float]]] = {"toolhub": [], "celery": []}
    redis_work: dict[str, dict[str, list[float]]] = {"toolhub": {}, "celery": {}}
    redis = Redis.from_url(stack.url)
    loop = asyncio.new_event_loop()
    try:
        baseline.start()
        baseline.activate()
        from bench.celery_baseline import noop

        for i in range(50):
            loop.run_until_complete(session.call("noop", {}, call_id=f"warm-{i}"))
            noop.apply_async(queue=baseline.queue).get(timeout=10)
        for r in range(args.rounds):
            before = commandstats(redis)
            for i in range(args.calls):
                started = time.time()
                result = loop.run_until_complete(session.call("noop", {}, call_id=f"cp{r}-{i}"))
                windows["toolhub"].append((started, time.time()))
                assert not result.is_error, result.prompt_text
            before = tally(redis, before, redis_work["toolhub"])
            for _ in range(args.calls):
                started = time.time()
                noop.apply_async(queue=baseline.queue).get(timeout=10)
                windows["celery"].append((started, time.time()))
            tally(redis, before, redis_work["celery"])
        time.sleep(0.5)  # the workers write their marks every 0.1 s
        ours = phases_of(windows["toolhub"], read_marks(folder, stack.workers[0].pid))
        theirs = phases_of(windows["celery"], read_marks(folder, baseline.procs[0].pid))
    finally:
        baseline.stop()
        session.close()
        loop.close()
        stack.stop()

    missing = _missing(ours, [span for _, span, _ in PHASES]) + _missing(
        theirs, [span for _, _, span in PHASES if span]
    )
    if missing:
        # A function the marks wrap is no longer on a call's path: say so rather than print n/a.
        print(f"marks missing from most calls: {', '.join(sorted(set(missing)))}", file=sys.stderr)
        return 1
    print("| phase (p50) | toolhub | raw Celery |")
    print("|---|---|---|")
    for label, mine, other in PHASES:
        theirs_cell = _median(theirs, *other) if other else "-"
        print(f"| {label} | {_median(ours, *mine)} | {theirs_cell} |")
    calls = len(ours)
    print("\n| Redis, per call (`INFO commandstats`) | toolhub | raw Celery |")
    print("|---|---|---|")
    for command in sorted((set(redis_work["toolhub"]) | set(redis_work["celery"])) - {"cpu"}):
        counts = [redis_work[side].get(command, [0.0, 0.0]) for side in ("toolhub", "celery")]
        if all(n < 0.01 * calls for n, _ in counts):
            continue  # connection set-up, the workers' periodic work
        cells = [f"{n / calls:.2f} ({usec / calls:.1f} us)" if n else "-" for n, usec in counts]
        print(f"| {command} | {' | '.join(cells)} |")
    cpu = [redis_work[side]["cpu"][1] / calls for side in ("toolhub", "celery")]
    print(f"| Redis's CPU time (`INFO cpu`), per call | {cpu[0]:.1f} us | {cpu[1]:.1f} us |")
    print(
        "\nA command a script runs is counted under its own name too, and its time is also "
        "inside the script's (`evalsha`)."
    )
    print(
        f"\n{len(ours)} and {len(theirs)} sequential no-op calls, one worker each (threads pool, "
        f"concurrency 4), {args.rounds} interleaved rounds, loopback Redis, {os.cpu_count()} CPUs."
    )
    return 0


def commandstats(redis: Redis) -> dict[str, tuple[int, float]]:
    """Calls and microseconds spent so far, per Redis command, and Redis's own CPU time (user
    and system, as the ``cpu`` entry)."""
    stats = {
        name.removeprefix("cmdstat_"): (int(stat["calls"]), float(stat["usec"]))
        for name, stat in redis.info("commandstats").items()
    }
    cpu = redis.info("cpu")
    stats["cpu"] = (1, (cpu["used_cpu_user"] + cpu["used_cpu_sys"]) * 1e6)
    return stats


def tally(
    redis: Redis, before: dict[str, tuple[int, float]], into: dict[str, list[float]]
) -> dict[str, tuple[int, float]]:
    """Add what Redis did since ``before`` to ``into`` (command -> [calls, usec]); returns
    the new reading. ``INFO`` itself is left out."""
    now = commandstats(redis)
    for name, (n, usec) in now.items():
        n0, usec0 = before.get(name, (0, 0.0))
        if name != "info" and (n > n0 or name == "cpu"):
            entry = into.setdefault(name, [0.0, 0.0])
            entry[0] += n - n0
            entry[1] += usec - usec0
    return now


def _missing(calls: list[dict[str, float]], spans: list[tuple[str, str]]) -> list[str]:
    """Marks that fewer than nine calls in ten have."""
    tags = {tag for span in spans for tag in span}
    return [tag for tag in tags if sum(tag in c for c in calls) < 0.9 * len(calls)]


def _median(calls: list[dict[str, float]], a: str, b: str) -> str:
    spans = [c[b] - c[a] for c in calls if a in c and b in c]
    if not spans:
        return "n/a"
    return f"{statistics.median(spans) * 1e6:.0f} us"


if __name__ == "__main__":
    raise SystemExit(main())
