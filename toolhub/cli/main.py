"""The ``toolhub`` command: one typer app, one module per group of subcommands."""

from __future__ import annotations

import typer

from . import demo, embedded, mcp_cmd, serve, tasks, up, worker

app = typer.Typer(
    name="toolhub",
    help="One typed tool system for AI agents: embedded or on Celery workers behind Redis.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

embedded.register(app)
worker.register(app)
serve.register(app)
mcp_cmd.register(app)
up.register(app)
tasks.register(app)
demo.register(app)


def main() -> None:
    app()
