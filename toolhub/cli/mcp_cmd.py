"""``toolhub mcp``: the session's tool set as an MCP server, on stdio (for an MCP client that
spawns it) or on streamable HTTP at ``http://HOST:PORT/mcp``.

Over stdio nothing but protocol frames reaches stdout; messages go to stderr.

The config it serves is admitted against the operator policy (``TOOLHUB_POLICY``) first, for
the default tenant with the workspace as its root: a config the policy refuses does not start,
and the violations are listed. ``${VAR}`` then expands only the policy's ``env_vars``. One case
is left as it was: over stdio, with no fleet and no policy file, the one user who spawned it is
the operator and the config is theirs, so it is served as written (toolhub's own ``TOOLHUB_*``
variables still never expand).
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from toolhub.ports import bind_refused
from toolhub.tracing import setup_from_env

from .embedded import ConfigOpt, RedisOpt, open_session
from .output import fail, stderr
from .policy import load
from .violations import show_violations

if TYPE_CHECKING:
    from toolhub.toolset import ToolSetConfig


class Transport(StrEnum):
    stdio = "stdio"
    http = "http"


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)


def mcp(
    transport: Annotated[
        Transport, typer.Option(help="stdio or streamable HTTP.")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="HTTP: interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP: port to listen on.")] = 8001,
    config: ConfigOpt = None,
    workspace: Annotated[Path | None, typer.Option(help="Workspace directory.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Session id.")] = None,
    redis: RedisOpt = None,
) -> None:
    """Serve the tool set over the Model Context Protocol."""
    from toolhub.http_guard import UnsafeBind, check_bind, flag_env
    from toolhub.mcp.transports import run_http, run_stdio
    from toolhub.tenancy import DEFAULT_TENANT
    from toolhub.tenancy.policy import POLICY_ENV

    if not 0 < port < 65536:
        fail(f"--port must be 1-65535, got {port}")
    token = os.environ.get("TOOLHUB_API_TOKEN") or None
    if transport is not Transport.stdio:
        try:
            check_bind(host, token=token, behind_auth_proxy=flag_env("TOOLHUB_BEHIND_AUTH_PROXY"))
        except UnsafeBind as err:
            fail(str(err))
        refused = bind_refused(host, port)
        if refused is not None:
            fail(f"cannot listen on {host}:{port}: {refused} (choose another --port)")
    ws = (workspace or Path(os.environ.get("TOOLHUB_WORKSPACE", "."))).resolve()
    own = transport is Transport.stdio and redis is None and not os.environ.get(POLICY_ENV)
    served = load_config(config) if own else admitted(config, ws)
    # Served to clients as the default tenant: a distributed session's calls are held to its
    # quotas in the operator's policy.
    quotas = load(None).quotas.for_tenant(DEFAULT_TENANT) if redis else None
    setup_from_env("toolhub-mcp")  # OTel traces and metrics when OTEL_* asks for them
    with open_session(served, ws, redis=redis, session_id=session, quotas=quotas) as sess:
        for warning in sess.warnings:
            stderr.print(f"[yellow]warning:[/] {warning}", highlight=False)
        if transport is Transport.stdio:
            run_stdio(sess)
            return
        stderr.print(f"toolhub MCP server on http://{host}:{port}/mcp", highlight=False)
        run_http(sess, host=host, port=port, token=token)


def load_config(config: Path | None) -> ToolSetConfig:
    """The user's own config as written, or exit 1 listing what is malformed."""
    from toolhub.core import ConfigError
    from toolhub.toolset import ToolSetConfig

    try:
        return ToolSetConfig.load(config)
    except ConfigError as err:
        show_violations(err)


def admitted(config: Path | None, workspace: Path) -> ToolSetConfig:
    """``config`` as the operator policy admits it, or exit 1 listing every violation."""
    from toolhub.core import ConfigError
    from toolhub.session import default_builder
    from toolhub.tenancy import DEFAULT_TENANT, admit

    policy = load(None)
    registry = default_builder().registry  # the session's own: built once
    try:
        admitted = admit(
            config, policy, tenant=DEFAULT_TENANT, tenant_root=workspace, registry=registry
        )
    except ConfigError as err:
        show_violations(err)
    policy.restrict_expansion()
    return admitted
