"""The ``toolhub`` command run inside the test process, as a subprocess would run it.

Each CLI subprocess spends about a second of CPU importing toolhub before it does anything;
the behaviour tests of the CLI run dozens of commands, so they call the console script's
``main`` here instead. What a subprocess would get is set up for the call and put back after:
``sys.argv``, the whole environment (``env`` replaces it, as ``subprocess.run(env=...)`` does),
the working directory, an empty stdin, captured stdout and stderr (not terminals, like pipes),
the size of the CLI's rich consoles (``COLUMNS`` and ``LINES``; 80 by 25 when unset, what rich
gives a pipe — pinned for the call, since a console made with ``COLUMNS`` set keeps that width;
set back after to the size it had, through rich's public ``Console.size``),
a stderr handler for log records of WARNING and above (where Python's last-resort handler
would print them in a process without logging set up), and which ``${VAR}`` references the
process may expand (``toolhub mcp`` narrows that to its operator policy's ``env_vars``).
The answer is a ``CompletedProcess``, so a test reads the same ``returncode``, ``stdout`` and
``stderr`` either way (``tests/cli/test_in_process.py`` compares the two).

What only a real process shows (the exit status the OS reports, signals, a missing optional
package, a terminal) stays with the real-subprocess tests (``TOOLHUB`` in the test modules).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from toolhub import env_refs
from toolhub.cli import output
from toolhub.cli.main import main


def run_cli(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``toolhub *args`` with environment ``env`` in directory ``cwd``: its exit code and what
    it printed."""
    out, err = _stream(), _stream()
    code = 0
    with _process_state(["toolhub", *args], env, cwd, out, err):
        try:
            main()
        except SystemExit as done:
            code = _exit_code(done.code, err)
    return subprocess.CompletedProcess(["toolhub", *args], code, _text(out), _text(err))


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", "replace")


def _exit_code(code: object, err: io.TextIOWrapper) -> int:
    """What ``sys.exit(code)`` makes the process's exit status (a message goes to stderr)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    err.write(f"{code}\n")
    return 1


@contextlib.contextmanager
def _process_state(
    argv: list[str],
    env: Mapping[str, str],
    cwd: Path,
    out: io.TextIOWrapper,
    err: io.TextIOWrapper,
) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr)
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    consoles = (output.stdout, output.stderr)
    sizes = [console.size for console in consoles]
    expandable = env_refs.restriction()
    os.environ.clear()
    os.environ.update(env)
    for console in consoles:
        console.size = (_number(env, "COLUMNS", 80), _number(env, "LINES", 25))
    os.chdir(cwd)
    sys.argv, sys.stdin, sys.stdout, sys.stderr = argv, io.StringIO(), out, err
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        env_refs.restrict(expandable)
        for console, size in zip(consoles, sizes, strict=True):
            console.size = size
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _number(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "")
    return int(value) if value.isdigit() else default
