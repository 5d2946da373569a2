"""The Lua scripts' reply codes have one set of names: each ``.lua`` header lists the same
names and values as its enum in ``toolhub/distributed/script_replies.py``, every script file is
one the store registers, and a built wheel carries them all (they are read from the installed
package at run time)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from toolhub.distributed.lua import reply_names, source
from toolhub.distributed.script_replies import REPLIES

ROOT = Path(__file__).resolve().parents[2]
#: Scripts without reply codes: the prelude and quota helpers, ``handoff`` (the message or nil),
#: ``promote`` (how many ids it took off the backlog).
NO_CODES = {"prelude", "quota", "handoff", "promote"}


def _lua_files() -> set[str]:
    folder = resources.files("toolhub.distributed.lua")
    return {entry.name[: -len(".lua")] for entry in folder.iterdir() if entry.name.endswith(".lua")}


@pytest.mark.parametrize("name", sorted(REPLIES))
def test_each_script_header_names_its_enum(name: str) -> None:
    enum = REPLIES[name]
    assert reply_names(name) == {member.name: member.value for member in enum}
    assert f"script_replies.{enum.__name__}" in source(name)


def test_every_script_file_is_accounted_for() -> None:
    assert _lua_files() == set(REPLIES) | NO_CODES
    for name in NO_CODES:
        assert reply_names(name) == {}


@pytest.mark.timeout(180)
def test_a_built_wheel_carries_every_script(tmp_path: Path) -> None:
    source_tree = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for part in ("toolhub", "workers"):
        shutil.copytree(ROOT / part, source_tree / part, ignore=ignore)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, source_tree / part)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=source_tree,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("toolhub-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for script in _lua_files():
        assert f"toolhub/distributed/lua/{script}.lua" in names, script
