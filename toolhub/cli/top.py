"""``toolhub top [--redis URL] [--metrics URL ...] [--interval S] [--once]``: the fleet, live.

A terminal dashboard redrawn in place every ``--interval`` seconds: calls/s, p50 and p99 run
time by tool (the workers' ``/metrics``), each queue's depth and its oldest call's wait, the
calls running now by worker (Redis), the workers' metrics endpoints with their calls in flight,
the background tasks, and each tenant's use this hour when tenants other than ``default``
exist. ``--once`` prints one frame and exits (for scripts and tests); Ctrl-C leaves the last
frame on screen and exits 0.

Redis is found as ``toolhub tasks`` finds it (``--redis`` or ``TOOLHUB_REDIS_URL``, the URL
``toolhub up`` exports, password included); the URL is shown without its password. The
metrics endpoints are given with ``--metrics`` (repeated) or ``TOOLHUB_METRICS_URLS``
(space-separated); ``toolhub up`` lists its workers'. Nothing here writes to Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from . import embedded
from .output import fail, stdout

if TYPE_CHECKING:
    from rich.console import RenderableType

    from .top_frame import Reading
    from .top_metrics import WorkerSample

RedisOpt = Annotated[
    str | None,
    typer.Option(
        "--redis",
        envvar="TOOLHUB_REDIS_URL",
        help="The fleet's Redis URL.",
        callback=embedded.redis_url,
    ),
]
MetricsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--metrics",
        envvar="TOOLHUB_METRICS_URLS",
        help="A worker's /metrics URL (repeat it; `toolhub up` lists them).",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("top")(top)


def top(
    redis: RedisOpt = None,
    metrics: MetricsOpt = None,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
) -> None:
    """A live view of the fleet: calls/s and latency by tool, queues, workers, tasks, tenants."""
    if not redis:
        fail("the fleet is in Redis: give --redis URL (or set TOOLHUB_REDIS_URL)")
    from .top_frame import frame  # what reads the fleet loads when asked, not for every command

    watcher = FleetWatcher.connect(redis, metrics or [])
    try:
        if once:
            if watcher.metrics_urls:
                watcher.read()  # the baseline of calls/s
                time.sleep(interval)
            stdout.print(frame(watcher.read(), stdout.size.width))
            return
        _live(watcher.read, interval)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    finally:
        watcher.close()


def _live(read: Callable[[], Reading], interval: float) -> None:
    from rich.live import Live

    from .top_frame import frame

    def drawn() -> RenderableType:
        return frame(read(), stdout.size.width)

    with Live(drawn(), console=stdout, auto_refresh=False, transient=False) as live:
        while True:
            time.sleep(interval)
            live.update(drawn(), refresh=True)


class FleetWatcher:
    """What one ``toolhub top`` reads on every refresh: Redis, and the workers' metrics."""

    def __init__(self, redis_url: str, metrics_urls: list[str]) -> None:
        import httpx

        from toolhub.distributed.settings import Settings
        from toolhub.distributed.shared import shared_backend
        from toolhub.errors import redact_url
        from toolhub.tasks.redis import RedisBackgroundTasks

        settings = Settings.from_env(redis_url)
        self.source = redact_url(redis_url)
        self.store, app = shared_backend(settings)
        self.tasks = RedisBackgroundTasks(self.store.client, app, settings, "")
        self.metrics_urls = [url for urls in metrics_urls for url in urls.split() if url]
        self.http = httpx.Client()
        self._before: list[WorkerSample] | None = None

    @classmethod
    def connect(cls, redis_url: str, metrics_urls: list[str]) -> FleetWatcher:
        """The watcher, or exit 1 with a clear message when Redis cannot be reached."""
        from redis.exceptions import RedisError

        from toolhub.errors import redis_reason

        watcher = cls(redis_url, metrics_urls)
        try:
            watcher.store.client.ping()
        except RedisError as exc:
            watcher.close()
            fail(f"cannot reach Redis at {watcher.source}: {redis_reason(exc)}")
        return watcher

    def read(self) -> Reading:
        from redis.exceptions import RedisError

        from toolhub.distributed.fleet_view import read_fleet
        from toolhub.distributed.settings import ALL_QUEUES
        from toolhub.distributed.usage import read_usage

        from .top_frame import Reading
        from .top_metrics import scrape, tool_figures

        reading = Reading(self.source, time.time())
        client, keys = self.store.client, self.store.records.keys
        try:
            reading.fleet = read_fleet(client, keys, ALL_QUEUES)
            reading.tenants = read_usage(client, keys, hours=1)
        except RedisError as exc:
            reading.fleet_error = f"unreachable: {exc}"
        try:
            reading.tasks = self.tasks.list_all()
        except RedisError as exc:
            reading.tasks_error = f"unreadable: {exc}"
        reading.workers = [scrape(self.http, url, time.time()) for url in self.metrics_urls]
        reading.tools = tool_figures(reading.workers, self._before)
        self._before = reading.workers
        return reading

    def close(self) -> None:
        self.http.close()
