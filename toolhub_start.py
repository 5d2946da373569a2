"""The ``toolhub`` console script's first step: Ctrl-C is answered before anything is imported.

Importing the CLI takes about a second of CPU (toolhub, pydantic, typer, rich); a process
interrupted in that second would print Python's ``KeyboardInterrupt`` traceback from whichever
import it was in. So the script's module is this one, outside the ``toolhub`` package (whose
``__init__`` is itself a large import): it installs a SIGINT handler that writes one line and
exits 130 at once (nothing has started, nothing needs stopping), then imports the CLI. Once the
CLI is loaded, Ctrl-C raises ``KeyboardInterrupt`` again (Python's own handler), which the
commands and ``toolhub.cli.main`` turn into their own stop and exit 130.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

INTERRUPTED = b"interrupted\n"


def _interrupted_while_loading(signum: int, frame: FrameType | None) -> None:
    os.write(2, INTERRUPTED)
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted_while_loading)
    from toolhub.cli.main import main as cli

    signal.signal(signal.SIGINT, signal.default_int_handler)
    cli()
