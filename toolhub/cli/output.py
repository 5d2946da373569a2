"""Shared CLI output: results on stdout, errors on stderr with a non-zero exit code. What a
command or tool wrote goes through ``terminal_safe`` before it reaches a terminal."""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from rich.console import Console

from .terminal_safe import clean, safe_json

#: The exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130

stdout = Console()
stderr = Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """``error: <message>`` on stderr, then exit ``code``. The message is printed as is:
    text such as ``pip install 'toolhub[embedded]'`` must not be read as rich markup."""
    stderr.print("[bold red]error:[/] ", end="", highlight=False)
    stderr.print(clean(message), highlight=False, markup=False)
    raise typer.Exit(code)


def print_json(value: Any) -> None:
    typer.echo(safe_json(value))
