"""Shared CLI output: results on stdout, errors on stderr with a non-zero exit code."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import typer
from rich.console import Console

stdout = Console()
stderr = Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    stderr.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))
