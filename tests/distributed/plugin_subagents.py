"""The sub-agent runner of the test fleet: a scripted host agent (the host's part of ``task``,
legitimately scripted) that calls real tools through its child session, provided to every tool
set a worker builds through ``builder.provide`` (``TOOLHUB_PLUGINS``), and to embedded test
sessions by ``runner_for``.

The script is the prompt: ``write <path> <text>``, ``read <path>``, ``remember`` (the prompts
of the transcript so far), ``slow <n> <marker>`` (n steps of 0.1 s, ``start``/``done`` lines
with the pid in the marker file), ``die`` (SIGKILLs its own process), anything else is echoed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from toolhub import Container, Session
from toolhub.assembly import toolhub_home
from toolhub.backends import SessionInfo
from toolhub.session_runner import SessionSubagentRunner, SubagentTranscript
from toolhub.subagents import SubagentRunner
from toolhub.toolset import ToolSetBuilder

CHILD_TOOLS = {"tools": [{"id": "Main:read_file"}, {"id": "Main:write_file"}]}


def scripted_agent(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
    if prompt == "die":
        return dying_agent(prompt, child, emit)
    if prompt.startswith("write "):
        _, path, text = prompt.split(" ", 2)
        result = child.call_sync("write_file", {"path": path, "content": text})
        return "wrote" if not result.is_error else f"refused: {result.error.detail}"
    if prompt.startswith("read "):
        result = child.call_sync("read_file", {"path": prompt.split(" ", 1)[1]})
        return result.prompt_text
    if prompt == "remember" or prompt.startswith("slow"):
        transcript = child.resources.get(SubagentTranscript)
        assert transcript is not None
        turns = " | ".join(t.prompt for t in transcript.turns)
    if prompt.startswith("slow"):
        _, steps, marker = prompt.split(" ", 2)
        with open(marker, "a") as handle:
            handle.write(f"start {os.getpid()}\n")
        for i in range(int(steps)):
            emit(f"step {i} pid {os.getpid()}\n")
            time.sleep(0.1)
        with open(marker, "a") as handle:
            handle.write(f"done {os.getpid()}\n")
        return f"slow done; turns: {turns}"
    if prompt == "remember":
        return turns
    emit(f"echoing {prompt}\n")
    return f"done: {prompt}"


def runner_for(container: Container, home: Path | None = None) -> SessionSubagentRunner:
    """One runner per session, its transcripts under ``<home>/subagents/<session>`` (home:
    ``$TOOLHUB_HOME``): every worker of one host shares them, so a re-run resumes."""
    info = container.get(SessionInfo)
    sid = info.session_id if info is not None else "default"
    state = Path(home or toolhub_home()) / "subagents" / sid
    return SessionSubagentRunner(scripted_agent, config=CHILD_TOOLS, state_dir=state)


def register(builder: ToolSetBuilder) -> None:
    builder.provide(SubagentRunner, runner_for)


def dying_agent(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
    """Kills its own process: the worker running it dies on every attempt."""
    emit(f"about to die {os.getpid()}\n")
    time.sleep(0.3)
    os.kill(os.getpid(), 9)
    return "unreachable"
