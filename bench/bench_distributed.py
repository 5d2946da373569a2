"""Distributed execution against raw Celery on the same machine and the same Redis.

    .venv/bin/python bench/bench_distributed.py [--calls 2000] [--block 100] [--concurrent 1000]
        [--rounds 5]

Starts a redis-server, two ``toolhub worker`` processes and two raw Celery workers per baseline
(threads pool, concurrency 4 each, loopback), then measures, in ``--rounds`` interleaved rounds
(toolhub, raw Celery, raw Celery + task events, again and again, so a noisy neighbour on the
machine hits every side alike; the table shows the median of the rounds):

* no-op round trip (sequential calls): ``session.call("noop")`` vs ``noop.delay().get()``,
  each round's calls taken in blocks of ``--block`` a side, in turn; 2,000 a side, so that a
  round's p99 is its twentieth slowest call: a slow phase of the machine slows every call of
  one side's block made meanwhile, and with fewer calls a side one such cluster alone can
  decide a round;
* throughput of concurrent no-op calls (all in flight at once), two bursts a side per round:
  toolhub, the baselines, then the same in reverse, each side's throughput its calls over
  its bursts' time;
* progress latency, worker emit → caller receipt, vs a raw Redis pub/sub round trip;
* cancel latency, ``session.cancel`` → the call's child process is gone.

Prints a markdown table (docs/distributed.md records the numbers), then the CPU each side
spends per call in its throughput bursts, by process (the caller, its workers, Redis: on two
shared cores their sum bounds the throughput), then each round's ratios,
their spread and a PASS/MISS per target of issue 18 (p50 <= 0.8x, p99 <= 0.9x, throughput
>= 1.5x of raw Celery, in every round); toolhub's workers send task events (Flower), so the
rounds against raw Celery with task events are printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from redis import Redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.distributed.plugin_tools import CONFIG, make_builder  # noqa: E402
from tests.fixtures_stack import STACK_ENV, Stack  # noqa: E402
from toolhub import Progress, Session  # noqa: E402

CELERY = str(Path(sys.executable).with_name("celery"))


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float) -> str:
    return f"{value * 1000:.2f} ms"


class Baseline:
    """Raw Celery workers (two unless told) with the no-op task; ``env`` is added to theirs."""

    def __init__(
        self,
        url: str,
        home: Path,
        *,
        events: bool,
        workers: int = 2,
        env: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.home = home
        self.events = events
        self.workers = workers
        self.env = env or {}
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def queue(self) -> str:
        return "baseline-events" if self.events else "baseline"

    def start(self) -> None:
        env = {
            **os.environ,
            "BENCH_EVENTS": "1" if self.events else "0",
            "BENCH_REDIS_URL": self.url,
            "PYTHONPATH": str(REPO),
            **self.env,
        }
        for i in range(self.workers):
            log = (self.home / f"baseline{i}.log").open("ab")
            self.procs.append(
                subprocess.Popen(
                    [
                        CELERY,
                        "-A",
                        "bench.celery_baseline:app",
                        "worker",
                        "--pool=threads",
                        "--concurrency=4",
                        f"--queues={self.queue}",
                        f"--hostname={self.queue}{i}@%h",
                        "--without-gossip",
                        "--without-mingle",
                        "--loglevel=WARNING",
                    ],
                    cwd=REPO,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        from bench.celery_baseline import app

        names = tuple(f"{self.queue}{i}@" for i in range(self.workers))

        def answering() -> int:
            replies = app.control.ping(timeout=0.5) or []
            return sum(1 for reply in replies for host in reply if host.startswith(names))

        deadline = time.monotonic() + 30
        while answering() < self.workers:
            if time.monotonic() > deadline:
                raise TimeoutError("baseline workers did not start")

    def activate(self) -> None:
        """The dispatcher side of this baseline: task-sent events with the worker events."""
        from bench.celery_baseline import app

        app.conf.task_send_sent_event = self.events

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(15)


def celery_round_trips(n: int, queue: str) -> list[float]:
    from bench.celery_baseline import noop

    samples = []
    for _ in range(n):
        started = time.perf_counter()
        noop.apply_async(queue=queue).get(timeout=10)
        samples.append(time.perf_counter() - started)
    return samples


def _activated_burst(baseline: Baseline, n: int) -> float:
    baseline.activate()
    return celery_throughput(n, baseline.queue)


def celery_throughput(n: int, queue: str) -> float:
    from bench.celery_baseline import noop

    started = time.perf_counter()
    results = [noop.apply_async(queue=queue) for _ in range(n)]
    for result in results:
        result.get(timeout=60)
    return n / (time.perf_counter() - started)


async def toolhub_round_trips(session: Session, n: int, tag: str = "rt") -> list[float]:
    samples = []
    for i in range(n):
        started = time.perf_counter()
        result = await session.call("noop", {}, call_id=f"{tag}-{i}")
        samples.append(time.perf_counter() - started)
        assert not result.is_error, result.prompt_text
    return samples


class CpuBudget:
    """CPU seconds (user + system, psutil) each group of processes spends, read around a
    burst: the caller (this process), one side's workers, and Redis. Throughput on two shared
    cores is bounded by their sum per call, so this says where a side's calls go."""

    def __init__(self, workers: list[int], redis: int) -> None:
        self.groups = {
            "caller": [psutil.Process()],
            "workers": [psutil.Process(pid) for pid in workers],
            "Redis": [psutil.Process(redis)],
        }

    def read(self) -> dict[str, float]:
        return {
            name: sum(sum(proc.cpu_times()[:2]) for proc in procs)
            for name, procs in self.groups.items()
        }

    def per_call(self, before: dict[str, float], calls: int) -> dict[str, float]:
        """Microseconds per call of each group since ``before``."""
        after = self.read()
        return {name: (after[name] - before[name]) / calls * 1e6 for name in after}


def interleaved_round_trips(
    session: Session,
    baselines: list[Baseline],
    labels: dict[bool, str],
    calls: int,
    block: int,
    tag: int,
) -> dict[str, list[float]]:
    """One round's sequential calls, ``calls`` a side, in blocks of ``block`` taken in turn
    (toolhub, then each baseline, again and again).

    The machine's slow phases last seconds. With each side's calls in one block, a phase
    could fall on one side only. Blocks of 100 keep each side's workers busy (calls alternated
    one by one leave each side's workers idle between calls) while every side samples the same
    phases."""
    samples: dict[str, list[float]] = {"toolhub": [], **{label: [] for label in labels.values()}}
    loop = asyncio.new_event_loop()
    try:
        for start in range(0, calls, block):
            n = min(block, calls - start)
            samples["toolhub"] += loop.run_until_complete(
                toolhub_round_trips(session, n, f"rt{tag}-{start}")
            )
            for baseline in baselines:
                baseline.activate()
                samples[labels[baseline.events]] += celery_round_trips(n, baseline.queue)
    finally:
        loop.close()
    return samples


async def toolhub_throughput(session: Session, n: int, tag: str = "tp") -> float:
    started = time.perf_counter()
    results = await asyncio.gather(
        *(session.call("noop", {}, call_id=f"{tag}-{i}") for i in range(n))
    )
    elapsed = time.perf_counter() - started
    assert all(not r.is_error for r in results)
    return n / elapsed


async def progress_latencies(session: Session, n: int) -> list[float]:
    samples = []
    async for item in session.stream("ticks", {"n": n, "delay_ms": 1}, call_id="latency"):
        if isinstance(item, Progress):
            samples.append(time.time() - item.payload["t"])
    return samples


def pubsub_latencies(url: str, n: int) -> list[float]:
    """Raw Redis pub/sub round trip: publish a timestamp, receive it in another thread."""
    sub = Redis.from_url(url).pubsub()
    sub.subscribe("bench:latency")
    sub.get_message(timeout=1)
    samples: list[float] = []
    done = threading.Event()

    def receive() -> None:
        while len(samples) < n:
            message = sub.get_message(timeout=1)
            if message and message["type"] == "message":
                samples.append(time.time() - float(message["data"]))
        done.set()

    threading.Thread(target=receive, daemon=True).start()
    pub = Redis.from_url(url)
    for _ in range(n):
        pub.publish("bench:latency", repr(time.time()))
        time.sleep(0.001)
    done.wait(30)
    sub.close()
    return samples


async def cancel_latencies(session: Session, n: int) -> list[float]:
    samples = []
    for i in range(n):
        stream = session.stream("sleeper", {"seconds": 60}, call_id=f"cancel-{i}")
        first = await anext(stream)
        pid = first.payload["pid"]
        started = time.perf_counter()
        await session.cancel(f"cancel-{i}")
        while True:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            await asyncio.sleep(0.0005)
        samples.append(time.perf_counter() - started)
        async for _ in stream:
            pass
    return samples


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrent", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=2000)
    parser.add_argument("--cancels", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=int, default=100)
    args = parser.parse_args()

    # The production lease, for the dispatcher here and (through ``env``: STACK_ENV's short
    # test lease would win over this process's environment) for the workers.
    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    os.environ.update({**STACK_ENV, **production})
    stack = Stack(workers=2, env=production).start()
    os.environ["BENCH_REDIS_URL"] = stack.url
    workspace = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    session = Session.connect(stack.url, CONFIG, workspace, builder=make_builder())
    labels = {False: "raw Celery", True: "raw Celery + task events"}
    baselines = [Baseline(stack.url, stack.home, events=events) for events in labels]
    #: per side: (p50s, p99s, throughputs), one entry per round
    rounds: dict[str, tuple[list[float], list[float], list[float]]] = {
        side: ([], [], []) for side in ["toolhub", *labels.values()]
    }

    #: per side: the CPU per call of each process group, one entry per round
    budgets: dict[str, list[dict[str, float]]] = {side: [] for side in rounds}

    def record(side: str, samples: list[float], throughput: float) -> None:
        p50s, p99s, tps = rounds[side]
        p50s.append(pct(samples, 0.5))
        p99s.append(pct(samples, 0.99))
        tps.append(throughput)

    def run_toolhub_burst(tag: str) -> float:
        return asyncio.run(toolhub_throughput(session, args.concurrent, tag))

    def burst(side: str, run: Callable[[], float]) -> float:
        """One burst's seconds; its CPU per call joins the side's budgets."""
        before = cpu[side].read()
        throughput = run()
        budgets[side].append(cpu[side].per_call(before, args.concurrent))
        return args.concurrent / throughput

    def bursts(r: int) -> dict[str, float]:
        """Each side's throughput in round ``r``: two bursts a side, in the order toolhub,
        baselines, then the reverse, so that a machine getting slower or faster during the
        round weighs on every side alike (one burst a side, in a fixed order, let a phase
        change between two bursts decide a round's ratio)."""
        tags = iter((f"tp{r}a", f"tp{r}b"))
        runs: dict[str, Callable[[], float]] = {
            "toolhub": lambda: run_toolhub_burst(next(tags)),
        }
        for baseline in baselines:
            runs[labels[baseline.events]] = functools.partial(
                _activated_burst, baseline, args.concurrent
            )
        seconds = dict.fromkeys(runs, 0.0)
        order = list(runs)
        for side in [*order, *reversed(order)]:
            seconds[side] += burst(side, runs[side])
        return {side: 2 * args.concurrent / spent for side, spent in seconds.items()}

    try:
        for baseline in baselines:
            baseline.start()
        assert stack.redis.proc is not None
        redis_pid = stack.redis.proc.pid
        cpu = {
            "toolhub": CpuBudget([w.pid for w in stack.workers], redis_pid),
            **{
                labels[b.events]: CpuBudget([proc.pid for proc in b.procs], redis_pid)
                for b in baselines
            },
        }
        asyncio.run(toolhub_round_trips(session, 50, "warm"))
        for baseline in baselines:
            baseline.activate()
            celery_round_trips(50, baseline.queue)
        for r in range(args.rounds):
            trips = interleaved_round_trips(session, baselines, labels, args.calls, args.block, r)
            throughputs = bursts(r)
            for side, samples in trips.items():
                record(side, samples, throughputs[side])
        progress = asyncio.run(progress_latencies(session, args.ticks))
        raw = pubsub_latencies(stack.url, args.ticks)
        cancels = asyncio.run(cancel_latencies(session, args.cancels))
    finally:
        for baseline in baselines:
            if baseline.procs:
                baseline.stop()
        session.close()
        stack.stop()

    med = statistics.median
    print("| measure | toolhub | raw Celery | ratio | raw Celery + task events | ratio | target |")
    print("|---|---|---|---|---|---|---|")
    for label, index, target in (("p50", 0, "<= 0.8x"), ("p99", 1, "<= 0.9x")):
        value = med(rounds["toolhub"][index])
        cells = []
        for side in labels.values():
            base = med(rounds[side][index])
            cells += [ms(base), f"{value / base:.2f}x"]
        print(f"| no-op round trip {label} | {ms(value)} | {' | '.join(cells)} | {target} |")
    our_tp = med(rounds["toolhub"][2])
    cells = []
    for side in labels.values():
        tp = med(rounds[side][2])
        cells += [f"{tp:.0f}/s", f"{our_tp / tp:.2f}x"]
    print(
        f"| throughput, {args.concurrent} concurrent no-op calls | {our_tp:.0f}/s "
        f"| {' | '.join(cells)} | >= 1.5x |"
    )
    print(
        f"| progress latency p50 (worker emit → caller) | {ms(pct(progress, 0.5))} "
        f"| raw Redis pub/sub: {ms(pct(raw, 0.5))} | | | | <= 1 ms |"
    )
    print(
        f"| progress latency p99 | {ms(pct(progress, 0.99))} "
        f"| raw Redis pub/sub: {ms(pct(raw, 0.99))} | | | | <= 5 ms |"
    )
    print(f"| cancel → process gone p50 | {ms(pct(cancels, 0.5))} | | | | | |")
    print(f"| cancel → process gone p99 | {ms(pct(cancels, 0.99))} | | | | | <= 200 ms |")
    print(
        f"\n{args.calls} sequential calls, {args.concurrent} concurrent, {args.ticks} progress "
        f"items, {args.cancels} cancels; 2 workers x 4 threads on each side, loopback Redis, "
        f"{os.cpu_count()} CPUs; median of {args.rounds} interleaved rounds, each round's "
        f"sequential calls in blocks of {args.block} a side, in turn, and two bursts of "
        f"{args.concurrent} a side (toolhub, baselines, then reversed)."
    )
    for side, (p50s, p99s, tps) in rounds.items():
        print(
            f"  {side}: p50 {', '.join(ms(v) for v in p50s)}; p99 "
            f"{', '.join(ms(v) for v in p99s)}; throughput {', '.join(f'{v:.0f}/s' for v in tps)}"
        )
    print_budgets(budgets)
    return 0 if verdicts(rounds, labels) else 1


def print_budgets(budgets: dict[str, list[dict[str, float]]]) -> None:
    """The throughput bursts' CPU per call, by process group (median of the bursts)."""
    groups = ("caller", "workers", "Redis")
    print("\nCPU per call in the throughput bursts, median of the bursts (psutil user + system):")
    print("| side | " + " | ".join(groups) + " | total |")
    print("|---" * (len(groups) + 2) + "|")
    for side, rounds in budgets.items():
        cells = [statistics.median(r[g] for r in rounds) for g in groups]
        totals = statistics.median(sum(r[g] for g in groups) for r in rounds)
        print(f"| {side} | " + " | ".join(f"{c:.0f} us" for c in cells) + f" | {totals:.0f} us |")


#: Issue 18's bar, in every round: (index in a round's samples, target, lower is better).
TARGETS = (
    ("round trip p50", 0, 0.8, True),
    ("round trip p99", 1, 0.9, True),
    ("throughput", 2, 1.5, False),
)


def verdicts(
    rounds: dict[str, tuple[list[float], list[float], list[float]]], labels: dict[bool, str]
) -> bool:
    """Each round's ratios against each baseline of the same round, their spread, and a
    verdict per target (met only when met in every round); True when all are met against
    raw Celery."""
    ours = rounds["toolhub"]
    met_all = True
    print()
    for baseline in labels.values():
        theirs = rounds[baseline]
        print(f"per round against {baseline}:")
        for name, index, target, lower in TARGETS:
            ratios = [a / b for a, b in zip(ours[index], theirs[index], strict=True)]
            ok = all(r <= target for r in ratios) if lower else all(r >= target for r in ratios)
            bound = f"{'<=' if lower else '>='} {target}x"
            print(
                f"  {name}: {', '.join(f'{r:.2f}x' for r in ratios)} (spread "
                f"{min(ratios):.2f}-{max(ratios):.2f}x); target {bound} in each: "
                f"{'PASS' if ok else 'MISS'}"
            )
            if baseline == labels[False]:
                met_all = met_all and ok
    return met_all


if __name__ == "__main__":
    raise SystemExit(main())
