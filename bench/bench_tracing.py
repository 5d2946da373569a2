"""Tracing's cost on a distributed no-op call: off against on, sampled 100%.

    .venv/bin/python bench/bench_tracing.py [--calls 400] [--rounds 3]

Starts three stacks (a redis-server and a ``toolhub worker`` each): one with no ``OTEL_*`` at
all (tracing off: toolhub's no-op path), one whose workers export every span
(``OTEL_TRACES_SAMPLER=always_on``) over OTLP/HTTP to a sink process that answers every export
at once (a collector's cost is not toolhub's), and the same with ``TOOLHUB_TRACE_PHASES=0``
(the call's, the worker's and the run's spans only). Each round runs every side in turn, the
calls of each side in a fresh dispatcher process (one process has one global tracer provider):
the traced side's dispatcher exports too, its ``execute_tool`` span and children included. A
side's round is its ``--calls`` sequential ``session.call("noop")`` round trips' p50; the table
shows the median of the rounds, the CPU per call of the dispatcher and of the workers, and a
PASS/MISS for issue 41's target (on <= 1.10x off).
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


def side(url: str, calls: int, traced: bool) -> None:
    """One dispatcher's round: prints its round trips' samples as JSON."""
    import asyncio

    from tests.distributed.plugin_tools import CONFIG, make_builder
    from toolhub import Session
    from toolhub.tracing import setup_from_env, shutdown

    if traced:
        assert setup_from_env("bench-dispatcher")
    workspace = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    session = Session.connect(url, CONFIG, workspace, builder=make_builder())

    async def run() -> list[float]:
        for _ in range(50):  # warm: connections, the message template, the workers' sessions
            await session.call("noop", {})
        samples = []
        cpu = time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            result = await session.call("noop", {})
            samples.append(time.perf_counter() - started)
            assert not result.is_error, result.prompt_text
        samples.append((time.process_time() - cpu) / calls)  # the dispatcher's CPU per call
        return samples

    samples = asyncio.run(run())
    session.close()
    shutdown()
    print(json.dumps(samples))


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
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--side", choices=["off", "on"])
    parser.add_argument("--url")
    parser.add_argument("--sink", type=int)
    args = parser.parse_args()
    if args.sink:
        sink(args.sink)
        return 0
    if args.side:
        side(args.url, args.calls, args.side == "on")
        return 0

    port = free_port()
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_METRICS_EXPORTER": "none",
    }
    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    plain = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    os.environ.clear()
    os.environ.update({**plain, **STACK_ENV, **production})
    sinking = subprocess.Popen([sys.executable, __file__, "--sink", str(port)])
    #: each side's variables, for its dispatcher and its workers
    sides = {"off": {}, "on": otel, "on, no phase spans": {**otel, "TOOLHUB_TRACE_PHASES": "0"}}
    stacks = {
        name: Stack(workers=1, env={**production, **extra}).start() for name, extra in sides.items()
    }
    p50s: dict[str, list[float]] = {name: [] for name in sides}
    #: CPU per call: the dispatcher's, the workers'
    cpus: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    try:
        for _ in range(args.rounds):
            for name, stack in stacks.items():
                env = {**os.environ, **sides[name]}
                traced = "on" if name != "off" else "off"
                argv = [sys.executable, __file__, "--side", traced, "--url", stack.url]
                before = worker_cpu(stack)
                done = subprocess.run(
                    [*argv, "--calls", str(args.calls)], env=env, capture_output=True, text=True
                )
                if done.returncode != 0:
                    raise SystemExit(f"the {name} side failed:\n{done.stderr[-3000:]}")
                *samples, dispatcher = json.loads(done.stdout.splitlines()[-1])
                workers = (worker_cpu(stack) - before) / (args.calls + 50)
                p50s[name].append(statistics.median(samples))
                cpus[name].append((dispatcher, workers))
    finally:
        for stack in stacks.values():
            stack.stop()
        sinking.terminate()
    off, on = (statistics.median(p50s[name]) for name in ("off", "on"))
    lean = statistics.median(p50s["on, no phase spans"])
    print("| distributed no-op round trip | p50 | rounds | CPU/call: dispatcher | workers |")
    print("|---|---|---|---|---|")
    for name in sides:
        rounds = ", ".join(f"{v * 1000:.2f}" for v in p50s[name])
        dispatcher = statistics.median(c[0] for c in cpus[name]) * 1e6
        workers = statistics.median(c[1] for c in cpus[name]) * 1e6
        print(
            f"| tracing {name} | {statistics.median(p50s[name]) * 1000:.2f} ms | {rounds} "
            f"| {dispatcher:.0f} µs | {workers:.0f} µs |"
        )
    ratio = on / off
    verdict = "PASS" if ratio <= TARGET else "MISS"
    print(f"\ntracing on / off p50: {ratio:.2f}x (target <= {TARGET:.2f}x): {verdict}")
    print(f"tracing on without phase spans / off p50: {lean / off:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
