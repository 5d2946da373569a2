"""``toolhub tools`` and ``validate``, and the session opener ``call`` (calling.py) shares.

``call`` switches to the distributed stack when ``--redis`` or ``TOOLHUB_REDIS_URL`` is set
(``tools`` needs no stack: the definitions are the same either way).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolhub.core import CapabilityMode, ConfigError
from toolhub.toolset import FORMATS, STRICT_FORMATS, ToolSetConfig

from .output import fail, print_json, stderr, stdout
from .violations import show_violations

if TYPE_CHECKING:
    from toolhub.session import Session
    from toolhub.tenancy import Quotas

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Tool-set config (YAML or JSON).")
]


def redis_url(value: str | None) -> str | None:
    """``--redis``, refused at once (a usage error) when it is not a Redis URL toolhub takes
    (``toolhub.distributed.redis_address``): redis-py's own complaint would come later, as an
    internal error."""
    if value:
        from toolhub.distributed.redis_address import RedisUrlError, parse_redis_url

        try:
            parse_redis_url(value)
        except RedisUrlError as exc:
            hint = f" (e.g. redis://{value}/0)" if "://" not in value else ""
            raise typer.BadParameter(f"{exc}{hint}") from None
    return value


RedisOpt = Annotated[
    str | None,
    typer.Option(
        "--redis",
        envvar="TOOLHUB_REDIS_URL",
        help="Redis URL: run on workers.",
        callback=redis_url,
    ),
]


MODE_HELP = (
    "Capability mode, overriding the config's `mode`: `all` (every tool), `read_only` (read, "
    "search, ask, plan: nothing that writes, runs or calls other tools), `read_write` "
    "(read_only + file edits and use_tool), `execute` (read_only + commands, background tasks "
    "and use_tool). See docs/contract.md."
)


def register(app: typer.Typer) -> None:
    app.command("tools")(tools)
    app.command("validate")(validate)


def open_session(
    config: Path | ToolSetConfig | None,
    workspace: Path | None = None,
    *,
    redis: str | None = None,
    session_id: str | None = None,
    mode: CapabilityMode | None = None,
    quotas: Quotas | None = None,
) -> Session:
    """A session for a CLI command; config problems go to stderr as a table, exit 1.
    ``quotas``: what a distributed session's calls are held to (``Session.connect``). The
    session stack (the whole tool catalog) is imported here, not with the CLI, so commands that
    need none of it start quickly."""
    from toolhub.session import Session

    source: Any = config
    if mode is not None:
        try:
            loaded = ToolSetConfig.load(config)
        except ConfigError as err:
            show_violations(err)
        source = ToolSetConfig.model_validate({**loaded.model_dump(), "mode": mode})
    ws = workspace or Path(os.environ.get("TOOLHUB_WORKSPACE", "."))
    if not ws.exists():
        fail(f"workspace {ws} does not exist")
    if not ws.is_dir():
        fail(f"workspace {ws} is not a directory")
    try:
        if redis:
            return Session.connect(redis, source, ws, session_id=session_id, quotas=quotas)
        return Session.embedded(source, ws, session_id=session_id)
    except ConfigError as err:
        show_violations(err)


def tools(
    config: ConfigOpt = None,
    format: Annotated[str, typer.Option(help=f"One of {', '.join(FORMATS)}.")] = "openai",
    mode: Annotated[CapabilityMode | None, typer.Option(help=MODE_HELP)] = None,
    workspace: Annotated[Path | None, typer.Option(help="Workspace directory.")] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="OpenAI strict form (formats openai and mcp).")
    ] = False,
) -> None:
    """Print the tool definitions the model would see, as JSON."""
    if format not in FORMATS:
        fail(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if strict and format not in STRICT_FORMATS:
        fail(f"no strict form for {format!r}: use {', '.join(STRICT_FORMATS)}")
    with open_session(config, workspace, mode=mode) as session:
        print_json(session.definitions(format, strict=strict))


def validate(
    config: Annotated[Path, typer.Argument(help="Tool-set config (YAML or JSON).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check a config; exit 1 and list every violation when it is invalid."""
    from toolhub.session import default_builder

    report = default_builder().validate(config)
    if as_json:
        print_json(
            {
                "valid": report.ok,
                "violations": [v.to_dict() for v in report.violations],
                "warnings": [w.message for w in report.warnings],
            }
        )
        raise typer.Exit(0 if report.ok else 1)
    for warning in report.warnings:
        stderr.print(f"[yellow]warning:[/] {warning.message}")
    if not report.ok:
        show_violations(ConfigError(report.violations), title=f"{config}: configuration violations")
    stdout.print(f"[green]valid[/]: {len(report.resolved)} tool(s) enabled")
