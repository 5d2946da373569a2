"""Tracing's cost on a distributed no-op call: off against on, sampled 100%.

    .venv/bin/python bench/bench_tracing.py [--calls 400] [--rounds 3] [--block 25]

Starts four stacks (a redis-server and a ``toolhub worker`` each): one with no ``OTEL_*`` at
all (tracing off: toolhub's no-op path), one whose workers export every span
(``OTEL_TRACES_SAMPLER=always_on``) over OTLP/HTTP to a sink process that answers every export
at once (a collector's cost is not toolhub's), the same with ``TOOLHUB_TRACE_PHASES=1`` (a child
span per phase), and the same with a sampler that keeps nothing
(``OTEL_TRACES_SAMPLER=always_off``: every call site runs, no span is recorded or exported;
what tracing costs before its spans do). Each side has its own dispatcher process (one
process has one global tracer provider; the traced sides' dispatchers export too, their
``execute_tool`` spans included), started once and warmed. The sides then take turns:
``--block`` sequential ``session.call("noop")`` round trips each, in a rotating order, until
each has made ``--calls`` per round; so a shared, busy machine's load falls on every side
alike. A round's figure is a side's p50 over its calls of the round; the table shows the
median of the rounds, the CPU per call of the dispatcher and of the workers, and a PASS/MISS
for issue 41's target (on <= 1.10x off); then the median over the turns of each turn's p50
ratio (neighbouring blocks share the machine's load of the moment: the steadier figure on a
busy machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from tests.fixtures_stack import STACK_ENV, Stack  # noqa: E402
from toolhub.ports import free_port  # noqa: E402

TARGET = 1.10


def sink(port: int) -> None:
    """An OTLP/HTTP endpoint that reads each export and answers 200 (an empty response)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def side(url: str, traced: bool) -> None:
    """One side's dispatcher: for each line ``N`` on stdin, ``N`` sequential no-op round trips;
    prints their durations and the dispatcher's CPU per call as one JSON line."""
    import asyncio

    from tests.distributed.plugin_tools import CONFIG, make_builder
    from toolhub import Session
    from toolhub.tracing import setup_from_env, shutdown

    if traced:
        assert setup_from_env("bench-dispatcher")
    workspace = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    session = Session.connect(url, CONFIG, workspace, builder=make_builder())

    async def block(calls: int) -> list[float]:
        samples = []
        cpu = time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            result = await session.call("noop", {})
            samples.append(time.perf_counter() - started)
            assert not result.is_error, result.prompt_text
        samples.append((time.process_time() - cpu) / calls)  # the dispatcher's CPU per call
        return samples

    loop = asyncio.new_event_loop()
    loop.run_until_complete(block(50))  # warm: connections, the message template, the workers
    print("ready", flush=True)
    for line in sys.stdin:
        print(json.dumps(loop.run_until_complete(block(int(line)))), flush=True)
    session.close()
    shutdown()


class Dispatcher:
    """A side's dispatcher process (``side``), driven a block at a time."""

    def __init__(self, url: str, traced: bool, env: dict[str, str]) -> None:
        argv = [sys.executable, __file__, "--side", "on" if traced else "off", "--url", url]
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def ready(self) -> None:
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"a dispatcher failed to start (exit {self.proc.wait()})")

    def block(self, calls: int) -> tuple[list[float], float]:
        """``calls`` round trips: their durations, and the dispatcher's CPU per call."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{calls}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"a dispatcher failed (exit {self.proc.wait()})")
        *samples, cpu = json.loads(line)
        return samples, cpu

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def worker_cpu(stack: Stack) -> float:
    """CPU seconds the stack's worker processes (and their children) have used so far."""
    total = 0.0
    for worker in stack.workers:
        process = psutil.Process(worker.pid)
        for one in [process, *process.children(recursive=True)]:
            try:
                times = one.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400, help="per side and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--block", type=int, default=25, help="calls per turn")
    parser.add_argument("--side", choices=["off", "on"])
    parser.add_argument("--url")
    parser.add_argument("--sink", type=int)
    args = parser.parse_args()
    if args.sink:
        sink(args.sink)
        return 0
    if args.side:
        side(args.url, args.side == "on")
        return 0

    port = free_port()
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_METRICS_EXPORTER": "none",
    }
    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLHUB_TRACE"))}
    os.environ.clear()
    os.environ.update({**plain, **STACK_ENV, **production})
    sinking = subprocess.Popen([sys.executable, __file__, "--sink", str(port)])
    #: each side's variables, for its dispatcher and its workers
    sides = {
        "off": {},
        "on": otel,
        "on, phase spans": {**otel, "TOOLHUB_TRACE_PHASES": "1"},
        "on, nothing sampled": {**otel, "OTEL_TRACES_SAMPLER": "always_off"},
    }
    stacks = {
        name: Stack(workers=1, env={**production, **extra}).start() for name, extra in sides.items()
    }
    dispatchers: dict[str, Dispatcher] = {}
    p50s: dict[str, list[float]] = {name: [] for name in sides}
    #: each turn's p50 of each side: turns are neighbours in time, so their ratios share a load
    blocks: dict[str, list[float]] = {name: [] for name in sides}
    #: CPU per call: the dispatcher's, the workers'
    cpus: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    try:
        for name, stack in stacks.items():
            env = {**os.environ, **sides[name]}
            dispatchers[name] = Dispatcher(stack.url, name != "off", env)
        for dispatcher in dispatchers.values():
            dispatcher.ready()
        names = list(sides)
        for _ in range(args.rounds):
            samples: dict[str, list[float]] = {name: [] for name in sides}
            spent = dict.fromkeys(sides, 0.0)
            worker = dict.fromkeys(sides, 0.0)
            turn = 0
            while min(len(v) for v in samples.values()) < args.calls:
                first = turn % len(names)
                for name in names[first:] + names[:first]:  # a rotating order
                    before = worker_cpu(stacks[name])
                    durations, cpu = dispatchers[name].block(args.block)
                    worker[name] += worker_cpu(stacks[name]) - before
                    samples[name] += durations
                    blocks[name].append(statistics.median(durations))
                    spent[name] += cpu * len(durations)
                turn += 1
            for name in sides:
                count = len(samples[name])
                p50s[name].append(statistics.median(samples[name]))
                cpus[name].append((spent[name] / count, worker[name] / count))
    finally:
        for dispatcher in dispatchers.values():
            dispatcher.stop()
        for stack in stacks.values():
            stack.stop()
        sinking.terminate()
    off, on = (statistics.median(p50s[name]) for name in ("off", "on"))
    phased = statistics.median(p50s["on, phase spans"])
    unsampled = statistics.median(p50s["on, nothing sampled"])
    print("| distributed no-op round trip | p50 | rounds | CPU/call: dispatcher | workers |")
    print("|---|---|---|---|---|")
    for name in sides:
        rounds = ", ".join(f"{v * 1000:.2f}" for v in p50s[name])
        dispatcher_cpu = statistics.median(c[0] for c in cpus[name]) * 1e6
        workers = statistics.median(c[1] for c in cpus[name]) * 1e6
        print(
            f"| tracing {name} | {statistics.median(p50s[name]) * 1000:.2f} ms | {rounds} "
            f"| {dispatcher_cpu:.0f} µs | {workers:.0f} µs |"
        )
    ratio = on / off
    verdict = "PASS" if ratio <= TARGET else "MISS"
    per_round = ", ".join(f"{a / b:.2f}" for a, b in zip(p50s["on"], p50s["off"], strict=True))
    print(f"\ntracing on / off p50: {ratio:.2f}x (rounds: {per_round}; target <= {TARGET:.2f}x)")
    print(f"{verdict}")
    print(f"tracing on with phase spans / off p50: {phased / off:.2f}x")
    print(f"tracing on, nothing sampled / off p50: {unsampled / off:.2f}x")
    for name in ("on", "on, phase spans", "on, nothing sampled"):
        paired = [a / b for a, b in zip(blocks[name], blocks["off"], strict=True)]
        print(
            f"tracing {name} / off, median of the {len(paired)} turns' p50 ratios: "
            f"{statistics.median(paired):.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
