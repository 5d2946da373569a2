"""The examples run as a user runs them: a subprocess with a workspace and a task on its command
line, the model server's URL and key in its environment, the user's answer on its stdin."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.examples.scripted_model import (
    ANSWER,
    IMAGE,
    NOTE,
    NOTE_TEXT,
    PIXEL,
    TASK,
    ScriptedModel,
)

REPO = Path(__file__).resolve().parents[2]

RunExample = Callable[[str, dict[str, str]], subprocess.CompletedProcess[str]]


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def run_example(tmp_path: Path) -> RunExample:
    """Runs ``examples/<script>`` on a fresh workspace holding the script's text file and PNG."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / NOTE).write_text(NOTE_TEXT + "\n")
    (workspace / IMAGE).write_bytes(base64.b64decode(PIXEL))

    def run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
        clean["TOOLHUB_HOME"] = str(tmp_path / "home")
        return subprocess.run(
            [sys.executable, str(REPO / "examples" / script), str(workspace), TASK],
            env={**clean, **env},
            input=ANSWER + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run
