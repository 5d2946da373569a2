"""README.md runs (issue 16): its code blocks are extracted and run as a newcomer would run
them, not copied into a test by hand.

* ``yaml`` blocks whose first line is ``# <file name>`` are saved under that name;
* ``python`` blocks run in order, each alone in a fresh interpreter, in a directory holding
  those files and a copy of README.md, with ``TOOLHUB_REDIS_URL`` pointing at a real stack
  (redis-server and ``toolhub worker`` processes);
* each ``sh`` line that runs ``toolhub`` is run: a server command (``up``, ``worker``,
  ``serve``) must come up and stay up without a traceback, then it is stopped; ``mcp`` on stdio
  must exit cleanly when its input ends. "Up" is what each says: ``serve`` answers ``/readyz``,
  ``up`` prints its Ctrl-C line, a ``worker`` writes ``ready`` to its heartbeat file. ``make``
  lines are what CI itself runs.
* ``text`` blocks are usage synopses, not commands.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.fixtures_stack import shared_stack
from toolhub.ports import free_port

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
SERVERS = {"up", "worker", "serve"}

pytestmark = pytest.mark.timeout(240)


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int


def blocks() -> list[Block]:
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", README.read_text(), re.M | re.S):
        line = README.read_text()[: match.start()].count("\n") + 1
        found.append(Block(match.group(1), match.group(2), line))
    return found


def test_every_block_has_a_known_kind() -> None:
    assert {b.lang for b in blocks()} <= {"sh", "python", "yaml", "text"}, blocks()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "README.md").write_text(README.read_text())
    for block in blocks():
        first = block.text.splitlines()[0]
        if block.lang == "yaml" and first.startswith("# "):
            (tmp_path / first[2:].strip()).write_text(block.text)
    return tmp_path


def _env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env.update(TOOLHUB_HOME=str(tmp_path / ".toolhub-home"), TOOLHUB_REDIS_URL=redis_url)
    return env


def test_each_python_block_runs_alone(request: pytest.FixtureRequest, workdir: Path) -> None:
    """As a reader copies one: each block in a fresh interpreter, none needing another's names."""
    stack = shared_stack(request)
    out = ""
    for number, block in enumerate((b for b in blocks() if b.lang == "python"), start=1):
        done = subprocess.run(
            [sys.executable, "-c", block.text],
            cwd=workdir,
            env=_env(workdir, stack.url),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"python block {number}: {done.stderr[-3000:]}"
        out += done.stdout
    assert "# toolhub" in out, out  # read_file of README.md, embedded and on a worker
    assert "building" in out, out  # the renamed bash streamed its output
    assert "hello" in out, out  # the custom Echo tool, used in-process


def _sh_commands() -> list[tuple[int, str]]:
    commands = []
    for block in blocks():
        if block.lang != "sh":
            continue
        for offset, raw in enumerate(block.text.splitlines(), start=1):
            line = raw.split("  #", 1)[0].strip()
            if line:
                commands.append((block.line + offset, line))
    return commands


def test_the_sh_blocks_name_only_make_and_toolhub() -> None:
    programs = {shlex.split(line)[0] for _, line in _sh_commands()}
    assert programs <= {"make", "toolhub"}, programs


@pytest.mark.parametrize(
    "command",
    [line for _, line in _sh_commands() if line.startswith("toolhub ")],
)
def test_each_toolhub_command_line_runs(
    request: pytest.FixtureRequest, workdir: Path, command: str
) -> None:
    stack = shared_stack(request)
    argv = shlex.split(command)
    env = _env(workdir, stack.url)
    sub = argv[1]
    if sub == "up":
        # Its own Redis and ports: the README's defaults may be taken on a shared machine.
        argv += [
            "--port",
            str(free_port()),
            "--flower-port",
            str(free_port()),
            "--metrics-port",
            "0",
        ]
    if sub == "serve":
        port = free_port()
        argv[argv.index("--port") + 1] = str(port)
    heartbeat = workdir / "worker.heartbeat"
    if sub == "worker":
        env["TOOLHUB_HEARTBEAT_FILE"] = str(heartbeat)
    argv[0] = TOOLHUB
    if sub not in SERVERS:
        done = subprocess.run(
            argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        return
    proc = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        if sub == "serve":
            _wait_http(f"http://127.0.0.1:{port}/readyz", proc)
        elif sub == "up":
            _wait_for_line(proc, "Ctrl-C stops everything", 120)
        else:
            _wait_ready(heartbeat, proc)
        assert proc.poll() is None, "the server exited"
    finally:
        proc.send_signal(signal.SIGINT if sub == "up" else signal.SIGTERM)
        out, _ = proc.communicate(timeout=90)
    assert "Traceback" not in out, out[-3000:]


def _wait_http(url: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never answered 200")


def _wait_ready(heartbeat: Path, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    """Until the worker says it is ready (connected, serving) in its heartbeat file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the worker exited"
        if heartbeat.exists() and heartbeat.read_text().strip() == "ready":
            return
        time.sleep(0.1)
    raise AssertionError("the worker never said it is ready")


def _wait_for_line(proc: subprocess.Popen[str], text: str, timeout: float) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if text in line:
            return
        assert time.monotonic() < deadline, "".join(seen)
    raise AssertionError("".join(seen))
