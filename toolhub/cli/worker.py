"""``toolhub worker``: one Celery worker process consuming toolhub queues.

Defaults that fit the design: every toolhub queue when ``--queues`` is omitted, the threads
pool (see docs/distributed.md for why), prefetch 1 unless the worker only serves the fast
queue, a unique node name per process, and no gossip or mingle (startup chatter that toolhub
does not use: leases and Redis records carry the state that matters).
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from toolhub.distributed.settings import ALL_QUEUES, QUEUES
from toolhub.logs import configure_json, json_logs

from .output import fail


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)


def worker(
    queues: Annotated[
        str | None, typer.Option(help="Comma-separated queues (default: every toolhub queue).")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Calls run at once (threads).")] = 8,
    redis: Annotated[
        str | None, typer.Option("--redis", envvar="TOOLHUB_REDIS_URL", help="Redis URL.")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Run a worker that executes toolhub calls from Redis."""
    chosen = [q.strip() for q in (queues or ",".join(ALL_QUEUES)).split(",") if q.strip()]
    unknown = sorted(set(chosen) - set(ALL_QUEUES))
    if unknown:
        fail(f"unknown queue(s) {', '.join(unknown)}; use {', '.join(ALL_QUEUES)}")
    if concurrency < 1:
        fail("--concurrency must be at least 1")
    if redis:
        os.environ["TOOLHUB_REDIS_URL"] = redis
    if chosen == [QUEUES["fast"]]:
        os.environ.setdefault("TOOLHUB_PREFETCH_MULTIPLIER", "4")
    if json_logs():
        # Before Celery starts: its startup warnings go through the JSON handler too, and
        # Celery keeps a root handler it finds instead of adding its own.
        configure_json(loglevel.upper())
    from workers.app import app as celery_app

    celery_app.worker_main(
        [
            # JSON logs: no startup banner on stdout, only JSON lines.
            *(["--quiet"] if json_logs() else []),
            "worker",
            "--pool=threads",
            f"--concurrency={concurrency}",
            f"--queues={','.join(chosen)}",
            f"--hostname=toolhub-{os.getpid()}@%h",
            f"--loglevel={loglevel}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
