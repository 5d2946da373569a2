"""``toolhub tools --strict`` (issue 14): the definitions in OpenAI strict form."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli

pytestmark = pytest.mark.timeout(120)


def _tools(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env["TOOLHUB_HOME"] = str(tmp_path / "home")
    return run_cli(["tools", "--workspace", str(tmp_path), *flags], env, tmp_path)


def test_tools_strict_prints_strict_functions(tmp_path: Path) -> None:
    done = _tools(tmp_path, "--strict")
    assert done.returncode == 0, done.stderr
    functions = [d["function"] for d in json.loads(done.stdout)]
    assert len(functions) == 24
    assert all(f["strict"] is True for f in functions)
    bash = next(f for f in functions if f["name"] == "bash")["parameters"]
    assert bash["required"] == list(bash["properties"])
    assert bash["properties"]["is_background"]["type"] == ["boolean", "null"]


def test_tools_strict_refuses_a_format_without_a_strict_form(tmp_path: Path) -> None:
    done = _tools(tmp_path, "--strict", "--format", "anthropic")
    assert done.returncode == 1
    assert "no strict form" in done.stderr and "Traceback" not in done.stderr
