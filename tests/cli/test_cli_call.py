"""``toolhub call`` as a terminal user meets it (issue 16): a background command started
embedded runs to its end before the process exits, ``--exit-code`` mirrors a command's exit
code, and ``--stream`` in a terminal does not print the output twice. What needs a real process
(its lifetime, a terminal) runs one; the rest runs in this process (``tests/cli/in_process.py``)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    return {**environ, "TOOLHUB_HOME": str(tmp_path / "home")}


def _call(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLHUB, "call", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=90
    )


def test_an_embedded_background_command_runs_to_its_end(
    env: dict[str, str], tmp_path: Path
) -> None:
    args = {"command": "sleep 1; echo bg-done", "description": "bg", "is_background": True}
    started = time.monotonic()
    done = _call(env, tmp_path, "bash", json.dumps(args))
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started >= 1.0, "it waited for the task"
    assert "waiting for background task" in done.stderr and ": exited" in done.stderr
    (log,) = (tmp_path / "home").rglob("task-*.log")
    assert log.read_text().strip() == "bg-done", "the command was not killed with the process"


def test_exit_code_is_the_calls_unless_mirrored(env: dict[str, str], tmp_path: Path) -> None:
    args = json.dumps({"command": "exit 3", "description": "fails"})
    assert run_cli(["call", "bash", args], env, tmp_path).returncode == 0  # the call succeeded
    assert run_cli(["call", "bash", args, "--exit-code"], env, tmp_path).returncode == 3
    assert run_cli(["call", "no_such_tool"], env, tmp_path).returncode == 1


def test_stream_in_a_terminal_shows_the_output_once(env: dict[str, str], tmp_path: Path) -> None:
    args = json.dumps({"command": "echo unique-line-42", "description": "echo"})
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [TOOLHUB, "call", "bash", args, "--stream"],
        env={**env, "COLUMNS": "200"},
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=60) == 0
    os.close(primary)
    text = seen.decode(errors="replace")
    assert text.count("unique-line-42") == 1, text
    assert "exit: 0" in text and "(output above)" in text, text
    piped = run_cli(["call", "bash", args, "--stream"], env, tmp_path)
    assert "unique-line-42" in piped.stdout, "a pipe still gets the whole result"
