"""Many SSE followers of one call on one gateway process: progress latency and memory per stream.

    .venv/bin/python bench/bench_sse_followers.py [--followers 1000] [--seconds 20]

A local stack (redis-server, one worker, ``toolhub serve`` as its own process) runs one ``bash``
call that prints its clock every 100 ms; ``--followers`` clients follow the call's events (``GET
/v1/sessions/{sid}/calls/{cid}/events``), split over two client processes so that the clients'
own parsing does not hold one core. Latency is the arrival time of a line at a follower minus
the time the command printed it (same host clock). The baseline measured in the same run is a
single follower: what one stream costs with no crowd. Targets: p99 <= 20 ms with all followers
attached, over 20 s of lines. Each line reaches every follower, so over a shorter run a single
line delayed for all of them is more than the 1% above the p99 and can set it alone; over 20 s
it takes two. The gateway's memory per open stream is reported, and so are its full garbage
collections while the followers were there (``toolhub_gc_pause_seconds`` from its ``/metrics``,
read before they attach and after they leave, never in between: rendering ``/metrics`` allocates
enough to move the next collection). With 1,000 streams open, one full collection stops the
gateway for tens of milliseconds and delays every line then in flight; when it falls after the
first seconds, it is in the p99. So is every other process on the same two cores: the gateway's
CPU per line and follower while all are attached is printed too, a figure that does not depend
on what else the machine runs (over the steady part of the run: before it, the gateway is
still answering the followers' requests; after it, closing their streams).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from toolhub.ports import free_port  # noqa: E402
from toolhub.stack.local import LocalStack  # noqa: E402

TARGET_P99_MS = 20.0
#: The verdict is on lines printed this long after every follower sent its request: before,
#: the gateway is still answering the crowd's requests and replaying each the call so far.
STEADY_AFTER_S = 2.0
STAMP = "for i in $(seq {n}); do date +%s.%N; sleep 0.1; done"


class _Follower(asyncio.Protocol):
    """One follower on a raw connection. Each chunk is stamped on arrival and kept; the SSE
    lines are parsed after the run (``_lags``), so the clients' own JSON parsing, on the same
    two cores as the gateway, is not in the measured time."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request = request
        self.done = done
        self.chunks: list[tuple[float, bytes]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.WriteTransport, transport).write(self.request)

    def data_received(self, data: bytes) -> None:
        self.chunks.append((time.time(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


def _lags(chunks: list[tuple[float, bytes]]) -> list[tuple[float, float]]:
    """(printed, arrival - printed) of every stamp in the stream's ``data:`` lines; a line
    arrived with the chunk that completed it."""
    lags: list[tuple[float, float]] = []
    pending = b""
    for arrived, data in chunks:
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            delta = (json.loads(line[5:]).get("payload") or {}).get("delta") or ""
            for stamp in delta.split():
                with contextlib.suppress(ValueError):
                    lags.append((float(stamp), arrived - float(stamp)))
    return lags


def client_main(url: str, path: str, followers: int) -> int:
    """A client process: ``followers`` streams; prints (attached_at, lags) as JSON at the end.

    It does not collect garbage while its streams are open: it keeps every chunk it receives,
    and a full collection over them stopped each client for 45-50 ms some 3.5 s after
    attaching, in every run, stamping the lines then in flight late for its half of the
    followers: the client's pause, not the gateway's latency. Collection is back on (if it was
    on) once the streams have ended, for a process that follows again (``bench_mix.py``)."""
    collecting = gc.isenabled()
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
        "Connection: close\r\n\r\n"
    ).encode()

    async def run() -> list[_Follower]:
        loop = asyncio.get_running_loop()
        streams = []
        for _ in range(followers):
            done: asyncio.Future[None] = loop.create_future()
            _, stream = await loop.create_connection(
                lambda d=done: _Follower(request, d), host, port
            )
            streams.append(stream)
        print(json.dumps({"attached": time.time()}), flush=True)
        await asyncio.gather(*(stream.done for stream in streams))
        return streams

    gc.disable()
    try:
        streams = asyncio.run(run())
    finally:
        if collecting:
            gc.enable()
    lags = [lag for stream in streams for lag in _lags(stream.chunks)]
    print(json.dumps({"lags": lags}), flush=True)
    return 0


def _start_call(client: httpx.Client, sid: str, seconds: int) -> tuple[str, threading.Thread]:
    """Start the printing call through the gateway and drain its own stream in a thread."""
    cid = f"sse-{secrets.token_hex(4)}"
    body = {
        "name": "bash",
        "arguments": {"command": STAMP.format(n=seconds * 10), "description": "clock"},
        "call_id": cid,
    }

    def drain() -> None:
        with client.stream(
            "POST", f"/v1/sessions/{sid}/calls", json=body, headers={"Accept": "text/event-stream"}
        ) as response:
            for _ in response.iter_lines():
                pass

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return cid, thread


def run_followers(
    url: str, sid: str, cid: str, followers: int, procs: int, gateway: psutil.Process, until: float
) -> tuple[list[tuple[float, float]], float, tuple[float, float]]:
    """Every follower's (printed - attached, lag) of the lines printed once all were attached,
    when that was, and the gateway's CPU (user, system seconds) per line and follower over the
    steady part of the run: from ``STEADY_AFTER_S`` after they attached until ``until`` (before
    the call ends and its streams close)."""
    path = f"/v1/sessions/{sid}/calls/{cid}/events"
    share = [followers // procs + (1 if i < followers % procs else 0) for i in range(procs)]
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--client", url, path, str(n)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in share
        if n
    ]
    attached = []
    for child in children:
        assert child.stdout is not None
        attached.append(json.loads(child.stdout.readline())["attached"])
    since = max(attached)
    time.sleep(max(0.0, since + STEADY_AFTER_S - time.time()))
    cpu_from, cpu_from_at = gateway.cpu_times(), time.time()
    time.sleep(max(0.0, until - time.time()))
    cpu_to, cpu_to_at = gateway.cpu_times(), time.time()
    lags: list[tuple[float, float]] = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        # Only lines printed once every follower was attached: earlier ones are a replay.
        lags += [
            (stamp - since, lag)
            for stamp, lag in json.loads(out.strip().splitlines()[-1])["lags"]
            if stamp > since
        ]
    measured = sum(1 for at, _ in lags if cpu_from_at - since <= at < cpu_to_at - since)
    if not measured:
        return lags, since, (float("nan"), float("nan"))
    user, system = cpu_to.user - cpu_from.user, cpu_to.system - cpu_from.system
    return lags, since, (user / measured, system / measured)


def full_collections(client: httpx.Client) -> tuple[float, float]:
    """(count, seconds) of the gateway's full garbage collections so far, from the
    ``toolhub_gc_pause_seconds`` histogram of its ``/metrics``."""
    text = client.get("/metrics").text
    found = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("toolhub_gc_pause_seconds")
        and sample.labels == {"generation": "2"}
    }
    return found["toolhub_gc_pause_seconds_count"], found["toolhub_gc_pause_seconds_sum"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        return client_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--followers", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()

    workspace = Path(tempfile.mkdtemp(prefix="bench-sse-"))
    os.environ.setdefault("TOOLHUB_FLEET_KEY", secrets.token_urlsafe(32))
    stack = LocalStack(workers=1, port=free_port(), flower_port=None, workspace=workspace)
    info = stack.start()
    gateway = next(
        p
        for p in psutil.Process().children(recursive=True)
        if "serve" in " ".join(p.cmdline()) and "toolhub" in " ".join(p.cmdline())
    )
    results = {}
    try:
        with httpx.Client(base_url=info.gateway_url, timeout=600) as client:
            sid = client.post("/v1/sessions", json={}).json()["session_id"]
            for label, n in (
                ("1 follower (baseline)", 1),
                (f"{args.followers} followers", args.followers),
            ):
                idle = gateway.memory_info().rss
                cid, drainer = _start_call(client, sid, args.seconds)
                time.sleep(0.3)
                sampler: list[int] = []
                stop = threading.Event()

                def sample(into: list[int] = sampler, done: threading.Event = stop) -> None:
                    while not done.wait(0.5):
                        into.append(gateway.memory_info().rss)

                watcher = threading.Thread(target=sample, daemon=True)
                watcher.start()
                before = full_collections(client)
                until = time.time() + args.seconds - 1.5
                lags, attached, cpu = run_followers(
                    info.gateway_url, sid, cid, n, 2 if n > 1 else 1, gateway, until
                )
                stop.set()
                drainer.join(60)
                after = full_collections(client)
                every = [lag for _, lag in lags]
                settled = [lag for after, lag in lags if after >= STEADY_AFTER_S]
                results[label] = {
                    "n": n,
                    "lines": len(every),
                    "p50": pct(settled, 0.5) * 1000,
                    "p99": pct(settled, 0.99) * 1000,
                    "p99_all": pct(every, 0.99) * 1000,
                    "peak_rss": max(sampler, default=idle),
                    "idle_rss": idle,
                    "attached_after": attached,
                    "full_gcs": (int(after[0] - before[0]), after[1] - before[1]),
                    "cpu": cpu,
                }
    finally:
        stack.stop()

    print(
        "| followers | lines received | progress p50 | progress p99 | p99 incl. the first "
        f"{STEADY_AFTER_S:.0f} s | gateway RSS idle -> peak |"
    )
    print("|---|---|---|---|---|---|")
    for label, r in results.items():
        print(
            f"| {label} | {r['lines']} | {r['p50']:.1f} ms | {r['p99']:.1f} ms "
            f"| {r['p99_all']:.1f} ms | {r['idle_rss'] / 2**20:.0f} -> "
            f"{r['peak_rss'] / 2**20:.0f} MiB |"
        )
    crowd = results[f"{args.followers} followers"]
    per_stream = (crowd["peak_rss"] - crowd["idle_rss"]) / crowd["n"] / 1024
    verdict = "PASS" if crowd["p99"] <= TARGET_P99_MS else "MISS"
    print(f"\ngateway memory per open stream: {per_stream:.0f} KiB")
    user, system = (seconds * 1e6 for seconds in crowd["cpu"])
    print(
        f"the gateway's CPU from {STEADY_AFTER_S:.0f} s after the followers attached until "
        f"shortly before the call's end: {user + system:.1f} us a line per follower (user "
        f"{user:.1f}, system {system:.1f}): what the fan-out costs, whatever else the machine runs"
    )
    count, seconds = crowd["full_gcs"]
    print(
        f"the gateway's full garbage collections while the followers were attached: {count}"
        + (
            f", {seconds * 1000:.1f} ms in all (each delays every line then in flight)"
            if count
            else ""
        )
    )
    print(
        f"target p99 <= {TARGET_P99_MS:.0f} ms with {args.followers} followers on one gateway "
        f"process: {verdict} ({crowd['p99']:.1f} ms; one follower alone: "
        f"{results['1 follower (baseline)']['p99']:.1f} ms)"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
