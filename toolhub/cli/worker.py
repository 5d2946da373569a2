"""``toolhub worker``: one Celery worker process consuming toolhub queues.

Defaults that fit the design: every toolhub queue when ``--queues`` is omitted, the threads
pool (see docs/distributed.md for why), prefetch 1 unless the worker only serves the fast
queue, a unique node name per process, and no gossip or mingle (startup chatter that toolhub
does not use: leases and Redis records carry the state that matters). A Redis URL the worker
cannot use (malformed, a database that does not exist, refused credentials) ends it at once
with a one-line reason and exit 1; a worker Celery stops on an unrecoverable error exits
non-zero too.
"""

from __future__ import annotations

import os
from typing import Annotated, NoReturn
from urllib.parse import urlparse

import typer
from redis import exceptions as redis_errors

from toolhub.distributed.redis_address import parse_redis_url
from toolhub.distributed.settings import ALL_QUEUES, DEFAULT_REDIS_URL, QUEUES
from toolhub.errors import redact_url, redis_reason
from toolhub.logs import configure_json, json_logs

from .output import fail
from .terminal_safe import clean


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
    url = os.environ.get("TOOLHUB_REDIS_URL") or DEFAULT_REDIS_URL
    reason = unusable_redis(url)
    if reason is not None:
        stop(f"cannot use the Redis URL {redact_url(url)}: {reason}", 1)
    from workers.app import app as celery_app

    # ``start``, not ``worker_main``, which drops the worker's exit code: a worker stopped by an
    # unrecoverable error must not look like a clean stop to a restart-on-failure supervisor.
    code = celery_app.start(
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
    if code:
        fail(
            f"the worker stopped on an unrecoverable error (exit {code}; its log says which)", code
        )


def stop(reason: str, code: int) -> NoReturn:
    """``error: <reason>`` as one line on stderr (however long: a supervisor's log keeps
    lines), then exit ``code``."""
    typer.echo(f"error: {clean(reason)}", err=True)
    raise typer.Exit(code)


def unusable_redis(url: str) -> str | None:
    """Why ``url`` cannot be the worker's Redis (a malformed URL, a database that is not a
    number or does not exist, refused credentials), or None. A Redis that does not answer yet
    is not a reason: the worker keeps trying to connect, as it does when Redis restarts."""
    parsed = urlparse(url)
    database = parsed.path.strip("/")
    if parsed.scheme in {"redis", "rediss"} and database and not database.isdigit():
        return f"the database in its path must be a number, not {database!r}"
    try:
        client = parse_redis_url(url).client(socket_connect_timeout=5, socket_timeout=5)
    except ValueError as exc:
        return str(exc)
    try:
        client.ping()
    except redis_errors.AuthenticationError as exc:
        return redis_reason(exc)
    except (redis_errors.ConnectionError, redis_errors.TimeoutError):
        return None
    except redis_errors.RedisError as exc:
        return f"Redis refused it: {exc}"
    finally:
        client.close()
    return None
