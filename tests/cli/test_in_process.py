"""``tests/cli/in_process.py`` answers what a real ``toolhub`` process answers: the same exit
code, stdout and stderr, byte for byte, for a command that succeeds (a table at a given width)
and one that fails (a violations table on stderr, exit 1) — so the CLI tests that run in this
process assert what a user of the command sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("args", "columns"),
    [(["policy", "show", "--tenant", "acme"], "120"), (["validate", "broken.yaml"], None)],
    ids=["a table on stdout", "a refusal on stderr"],
)
def test_in_process_and_real_process_answer_alike(
    tmp_path: Path, args: list[str], columns: str | None
) -> None:
    (tmp_path / "broken.yaml").write_text("tools: [unclosed\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")}
    env.pop("COLUMNS", None)
    env["TOOLHUB_HOME"] = str(tmp_path / "home")
    if columns:
        env["COLUMNS"] = columns
    real = subprocess.run(
        [TOOLHUB, *args],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    here = run_cli(args, env, tmp_path)
    assert (here.returncode, here.stdout, here.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    assert real.stdout or real.stderr, "the command printed something to compare"
