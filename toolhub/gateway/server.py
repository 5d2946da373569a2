"""Running the gateway: ``toolhub serve`` (uvicorn in the foreground) and ``ThreadedServer``
(uvicorn on a background thread of this process, for embedding, tests and benchmarks)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI

from toolhub.backends.oom import protect
from toolhub.logs import configure_json, json_logs
from toolhub.ports import free_port
from toolhub.process_heap import freeze_startup_heap, space_full_collections
from toolhub.redaction import redact_access_log

from .app import create_app
from .settings import GatewaySettings

logger = logging.getLogger("toolhub.gateway")


def build_app(settings: GatewaySettings, **overrides: Any) -> FastAPI:
    """The app for ``settings``; a distributed gateway gets the shared store's views."""
    if settings.redis_url and not overrides:
        from .distributed import distributed_parts

        overrides = distributed_parts(settings.redis_url)
    return create_app(settings, **overrides)


def serve(settings: GatewaySettings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the gateway on ``host:port`` until stopped. Raises ``UnsafeBind`` before listening
    when ``host`` is beyond loopback and nothing authenticates callers."""
    settings = settings.bound_to(host)
    # JSON logs: one root handler, and uvicorn's loggers (access log included) propagate to it
    # instead of getting uvicorn's own text handlers.
    json_mode = json_logs()
    if json_mode:
        configure_json()
    # Once logging is set up, so a warning that it cannot be done is a JSON line when asked.
    protect("the toolhub gateway")  # a command's memory must not cost every client's connection
    app = build_app(settings)
    redact_access_log()
    freeze_startup_heap()
    space_full_collections()
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        log_config=None if json_mode else uvicorn.config.LOGGING_CONFIG,
        timeout_graceful_shutdown=10,
        proxy_headers=False,
        access_log=settings.access_log,
    )


class ThreadedServer:
    """A uvicorn server on a daemon thread; ``url`` once started, ``stop()`` to shut down."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", lifespan="on", ws="none"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="toolhub-gateway", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> ThreadedServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"gateway did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
