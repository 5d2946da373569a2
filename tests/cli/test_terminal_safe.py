"""What a command prints never drives the operator's terminal (issue 36): ``toolhub call``,
``toolhub tasks logs`` and ``toolhub tasks show`` strip escape sequences and controls from
command output, embedded and against Redis, while ordinary text (non-ASCII too) stays.

The command prints an OSC 52 clipboard write, an OSC 0 title, a clear screen and a cursor
move, between ordinary words; the tool passes them through (the session's own result has
them), so only the CLI stands between them and the terminal. The commands run in this process
(``tests/cli/in_process.py``), but for ``--stream``, which needs a real terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli
from tests.fixtures_stack import shared_stack
from toolhub import Session
from toolhub.cli.terminal_safe import clean, safe_json

pytestmark = pytest.mark.timeout(180)

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
BASH = {"tools": [{"id": f"Main:{t}"} for t in ("bash", "task_output", "kill_task")]}
#: Ordinary output the CLI must keep, as is.
TEXT = "héllo wörld ✓ 日本"
#: printf's format: the attack sequences around ``TEXT``.
PRINTF = (
    r"printf 'start \033]52;c;ZWNobyBwd25lZA==\007 \033]0;owned-title\007"
    r"\033[2J\033[H%s\033[31m end\n' '" + TEXT + "'"
)
#: What must never reach the terminal: the sequences' introducers and their payloads.
RAW = ("\x1b]", "\x1b[2J", "\x1b[H", "\x07", "ZWNobyBwd25lZA", "owned-title")


def assert_clean(output: str) -> None:
    """``output`` holds the command's output cleaned; ``show`` prints the command line too (its
    escapes as typed, harmless text), so only what follows ``output (tail):`` is the output."""
    printed = output.split("output (tail):")[-1]
    for raw in RAW:
        assert raw not in printed, f"{raw!r} reached the terminal: {output!r}"
    assert "\x1b" not in output and "\x07" not in output, output
    assert TEXT in printed and "start" in printed and "end" in printed, output


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]52;c;ZWNobyBwd25lZA==\x07after", "after"),
        ("\x1b]0;title\x1b\\ok", "ok"),
        ("\x1b[2J\x1b[Hcleared", "cleared"),
        ("a\x1b[31mred\x1b[0m", "ared"),
        ("\x9b2J8-bit CSI, \x9d0;title\x9cOSC", "8-bit CSI, OSC"),
        ("cr\roverwrite, bel\x07, del\x7f, esc c\x1bc", "croverwrite, bel, del, esc c"),
        ("unended \x1b]0;title\nnext line", "unended \nnext line"),
        (f"{TEXT}\ttab\n", f"{TEXT}\ttab\n"),
    ],
)
def test_clean_removes_sequences_and_controls_and_keeps_text(raw: str, shown: str) -> None:
    assert clean(raw) == shown


def test_a_sequence_split_between_chunks_never_reaches_the_terminal_whole() -> None:
    first, second = "out \x1b]52;c;ZWNv", "byBw\x07 more"
    joined = clean(first) + clean(second)
    assert "\x1b" not in joined and "\x07" not in joined and joined.endswith(" more")


def test_json_output_escapes_every_control() -> None:
    text = safe_json({"out": f"\x1b[2J\x9b{TEXT}"})
    assert "\x1b" not in text and "\x9b" not in text
    assert json.loads(text) == {"out": f"\x1b[2J\x9b{TEXT}"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")}
    return {**environ, "TOOLHUB_HOME": str(tmp_path / "home"), "COLUMNS": "200"}


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env, cwd)


def test_toolhub_call_prints_command_output_without_its_sequences(
    env: dict[str, str], tmp_path: Path
) -> None:
    args = json.dumps({"command": PRINTF, "description": "escapes"})
    piped = run(env, tmp_path, "call", "bash", args)
    assert piped.returncode == 0, piped.stderr
    assert_clean(piped.stdout)
    as_json = run(env, tmp_path, "call", "bash", args, "--json")
    assert "\x1b" not in as_json.stdout and "\\u001b]52" in as_json.stdout

    # --stream in a terminal: the output goes live to stderr, the status line to stdout.
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [TOOLHUB, "call", "bash", args, "--stream"],
        env=env,
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
    assert proc.wait(timeout=90) == 0
    os.close(primary)
    assert_clean(seen.decode(errors="replace"))


def start_background(session: Session) -> str:
    started = session.call_sync(
        "bash", {"command": PRINTF, "description": "escapes", "is_background": True}
    )
    assert not started.is_error and started.output is not None, started.prompt_text
    task_id = str(started.output.value["task_id"])
    done = session.call_sync("task_output", {"task_ids": [task_id], "timeout_ms": 30000})
    assert "\x1b]52;c;" in done.prompt_text, "the tool passes the sequences through"
    return task_id


def test_toolhub_tasks_logs_and_show_embedded(env: dict[str, str], tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    previous = os.environ.get("TOOLHUB_HOME")
    os.environ["TOOLHUB_HOME"] = env["TOOLHUB_HOME"]
    try:
        with Session.embedded(BASH, workspace) as session:
            task_id = start_background(session)
    finally:
        if previous is None:
            os.environ.pop("TOOLHUB_HOME")
        else:
            os.environ["TOOLHUB_HOME"] = previous
    for command in ("logs", "show"):
        shown = run(env, workspace, "tasks", command, task_id)
        assert shown.returncode == 0, shown.stderr
        assert_clean(shown.stdout)


def test_toolhub_tasks_logs_show_and_list_against_redis(
    request: pytest.FixtureRequest, env: dict[str, str], tmp_path: Path
) -> None:
    stack = shared_stack(request)
    env = {**env, "TOOLHUB_REDIS_URL": stack.url}
    with Session.connect(stack.url, BASH, tmp_path) as session:
        task_id = start_background(session)
        for args in (("logs", task_id), ("logs", task_id, "--follow"), ("show", task_id)):
            shown = run(env, tmp_path, "tasks", *args)
            assert shown.returncode == 0, shown.stderr
            assert_clean(shown.stdout)
        listed = run(env, tmp_path, "tasks", "list", "--session", session.session_id)
        assert listed.returncode == 0 and task_id in listed.stdout
        assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
