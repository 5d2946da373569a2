"""Shared CLI output: results on stdout, errors on stderr with a non-zero exit code."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import typer
from rich.console import Console

stdout = Console()
stderr = Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """``error: <message>`` on stderr, then exit ``code``. The message is printed as is:
    text such as ``pip install 'toolhub[embedded]'`` must not be read as rich markup."""
    stderr.print("[bold red]error:[/] ", end="", highlight=False)
    stderr.print(message, highlight=False, markup=False)
    raise typer.Exit(code)


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))
