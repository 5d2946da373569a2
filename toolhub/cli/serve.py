"""``toolhub serve``: the HTTP gateway in the foreground (uvicorn).

Embedded unless ``--redis``/``TOOLHUB_REDIS_URL`` is set; sessions default to ``--config``
(or ``TOOLHUB_CONFIG``) and live under ``--workspace`` (or ``TOOLHUB_WORKSPACE``, else the
current directory). ``TOOLHUB_API_TOKEN`` turns on bearer-token auth, and so do named API keys
(``toolhub keys``, in ``TOOLHUB_KEYS_FILE``), which make the gateway multi-tenant. On loopback
the gateway answers only loopback ``Host`` names (DNS rebinding); beyond loopback it refuses to
start without a token or a key unless ``--behind-auth-proxy`` says a proxy authenticates every
request.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from toolhub.ports import bind_refused
from toolhub.sandbox.root_guard import RootRefused, refuse_root

from .embedded import redis_url
from .output import fail, stderr
from .policy import require_valid_config


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", envvar="TOOLHUB_CONFIG", help="Default tool-set config."),
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(envvar="TOOLHUB_WORKSPACE", help="Root of every session's workspace."),
    ] = None,
    redis: Annotated[
        str | None,
        typer.Option(
            "--redis",
            envvar="TOOLHUB_REDIS_URL",
            help="Redis URL: run on workers.",
            callback=redis_url,
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host name to answer (repeatable; '*' for any). Default: the loopback names "
            "when bound to loopback, any otherwise. Env: TOOLHUB_ALLOWED_HOSTS (comma-separated).",
        ),
    ] = None,
    behind_auth_proxy: Annotated[
        bool,
        typer.Option(
            "--behind-auth-proxy",
            envvar="TOOLHUB_BEHIND_AUTH_PROXY",
            help="Allow a non-loopback --host without TOOLHUB_API_TOKEN: a proxy in front "
            "authenticates every request.",
        ),
    ] = False,
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log",
            envvar="TOOLHUB_ACCESS_LOG",
            help="Log one line per request (off by default; /metrics counts requests).",
        ),
    ] = False,
) -> None:
    """Serve tool definitions and calls over HTTP (JSON and SSE)."""
    from toolhub.gateway import GatewaySettings
    from toolhub.gateway.server import serve as run
    from toolhub.tenancy.keys import KeyFile

    if not 0 < port < 65536:
        fail(f"--port must be 1-65535, got {port}")
    if config is not None and not config.is_file():
        fail(f"config file {config} does not exist")
    require_valid_config(config)
    root = workspace or Path.cwd()
    if not root.is_dir():
        fail(f"workspace {root} is not a directory")
    try:
        settings = GatewaySettings.from_env(
            workspace=root, config=str(config) if config else None, redis_url=redis
        )
        if allowed_host:
            hosts = frozenset(h.strip().lower() for h in allowed_host if h.strip())
            settings = replace(settings, allowed_hosts=None if "*" in hosts else hosts)
        if behind_auth_proxy:
            settings = replace(settings, behind_auth_proxy=True)
        if access_log:
            settings = replace(settings, access_log=True)
        settings = settings.bound_to(host)
    except ValueError as err:
        fail(str(err))
    if redis:
        _check_redis(redis)
    deployment = "distributed" if settings.distributed else "embedded"
    if not settings.distributed:
        try:  # embedded: this process runs the clients' commands
            refuse_root("an embedded toolhub gateway")
        except RootRefused as err:
            fail(str(err))
    named = settings.keys_file is not None and bool(KeyFile(settings.keys_file).read())
    modes = ["API keys, multi-tenant"] if named else []
    modes += ["bearer token"] if settings.api_token else []
    auth = ", ".join(modes) or "no auth"
    if not modes and settings.behind_auth_proxy:
        auth = "no auth: behind an authenticating proxy"
    refused = bind_refused(host, port)
    if refused is not None:
        fail(f"cannot listen on {host}:{port}: {refused} (choose another --port)")
    stderr.print(f"toolhub gateway on http://{host}:{port} ({deployment}, {auth})", highlight=False)
    run(settings, host=host, port=port)


def _check_redis(url: str) -> None:
    """A Redis URL the gateway can never use (malformed, refused credentials) stops it here; a
    Redis that does not answer yet is a warning: the gateway starts, and its calls answer 503
    until Redis does (a Redis that starts after the gateway is normal in a deployment)."""
    from redis import Redis
    from redis.exceptions import RedisError

    from toolhub.errors import redact_url

    from .worker import unusable_redis

    reason = unusable_redis(url)
    if reason is not None:
        fail(f"cannot use the Redis URL {redact_url(url)}: {reason}")
    client = Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except RedisError as exc:
        stderr.print(
            f"[yellow]warning:[/] Redis at {redact_url(url)} does not answer ({exc}): calls "
            "answer 503 until it does",
            highlight=False,
        )
    finally:
        client.close()
