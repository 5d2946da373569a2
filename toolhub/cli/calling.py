"""``toolhub call``: one tool call from the command line, as the model would see it.

What a terminal user expects beyond the model's view:

* ``--stream`` shows progress live on stderr; the result then goes to stdout. In a terminal
  both show, so after streamed output only the result's status line is printed again (a pipe
  still gets the whole result).
* The exit code is 0 when the call succeeded and 1 when it failed; ``--exit-code`` mirrors
  the command's own exit code instead, for tools that run one (``bash``, ``monitor``).
* An embedded session lives in this process: a background command started here would die
  with it. So ``call`` waits for the session's background tasks before it exits (Ctrl-C kills
  them), and says so; a distributed session (``--redis``) keeps them on the workers.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolhub.core import CallResult, drain

from .embedded import ConfigOpt, RedisOpt, open_session
from .output import INTERRUPTED, print_json, stderr
from .progress import ProgressView
from .terminal_safe import clean

if TYPE_CHECKING:
    from toolhub.session import Session

#: How long ``call`` waits for an embedded session's background tasks at most.
BACKGROUND_WAIT_S = 24 * 3600.0


def register(app: typer.Typer) -> None:
    app.command("call")(call)


def call(
    name: Annotated[str, typer.Argument(help="Client name of the tool.")],
    args: Annotated[str | None, typer.Argument(help="Arguments as a JSON object.")] = None,
    config: ConfigOpt = None,
    workspace: Annotated[Path | None, typer.Option(help="Workspace directory.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Session id.")] = None,
    stream: Annotated[bool, typer.Option("--stream", help="Show progress live.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole result.")] = False,
    exit_code: Annotated[
        bool,
        typer.Option("--exit-code", help="Exit with the command's own exit code (bash, monitor)."),
    ] = False,
    redis: RedisOpt = None,
) -> None:
    """Call one tool and print what the model would read.

    Exit code: 0 when the call succeeded, 1 when it failed; a command that exits non-zero is
    a successful call (--exit-code mirrors its code). Embedded, it waits for the background
    tasks it started, which would die with this process."""
    live = stream and not as_json
    with open_session(config, workspace, redis=redis, session_id=session) as sess:
        view = ProgressView(enabled=live)
        with view:
            result = asyncio.run(drain(sess.stream(name, args), view.show))
        _print(result, as_json=as_json, streamed=view.streamed_output)
        if not redis:
            _wait_for_background(sess)
    raise typer.Exit(_code(result, mirror=exit_code))


def _print(result: CallResult, *, as_json: bool, streamed: bool) -> None:
    if as_json:
        print_json(result.to_dict())
    elif result.is_error:
        stderr.print(clean(result.prompt_text), highlight=False, markup=False)
    elif streamed and sys.stdout.isatty():
        typer.echo(clean(result.prompt_text.split("\n", 1)[0]) + "  (output above)")
    else:
        typer.echo(clean(result.prompt_text))


def _code(result: CallResult, *, mirror: bool) -> int:
    if result.is_error:
        return 1
    value: Any = result.output.value if result.output is not None else None
    if mirror and isinstance(value, dict) and isinstance(value.get("exit_code"), int):
        return int(value["exit_code"]) & 0xFF
    return 0


def _wait_for_background(session: Session) -> None:
    """Keep this process (and so the embedded session's background commands) alive until
    they finish; Ctrl-C kills them."""
    from toolhub.tasks import BackgroundTasks

    tasks = session.resources.get(BackgroundTasks)
    if tasks is None:
        return
    running = [t.task_id for t in tasks.running(session.session_id)]
    if not running:
        return
    stderr.print(
        f"waiting for background task(s) {', '.join(running)}: an embedded session ends with "
        "this process (Ctrl-C kills them; `toolhub up` and --redis keep them on workers)",
        highlight=False,
        markup=False,
    )
    try:
        done = tasks.wait(running, "wait_all", BACKGROUND_WAIT_S)
    except KeyboardInterrupt:
        for task_id in running:
            tasks.kill(task_id)
        stderr.print("killed", highlight=False)
        raise typer.Exit(INTERRUPTED) from None
    for snap in done:
        stderr.print(clean(f"{snap.task_id}: {snap.status_text}"), highlight=False, markup=False)
