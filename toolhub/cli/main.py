"""The ``toolhub`` command: one typer app, one module per group of subcommands."""

from __future__ import annotations

import typer

from . import embedded

app = typer.Typer(
    name="toolhub",
    help="One typed tool system for AI agents: embedded or on Celery workers behind Redis.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

embedded.register(app)


def main() -> None:
    app()
