"""The suite's own setup names real things: every file it schedules first exists (a renamed
one would silently lose its place), and every client a test module asks for is one
``tests/client_venvs.py`` knows how to build."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import client_venvs
from tests.conftest import LONGEST_FILES

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_scheduled_first_exists() -> None:
    assert [name for name in LONGEST_FILES if not (ROOT / name).is_file()] == []


def test_every_needed_client_is_one_the_suite_can_build() -> None:
    known = {*client_venvs.PYTHON_CLIENTS, client_venvs.INSPECTOR_NAME, *client_venvs.NPM_CLIENTS}
    asked: dict[str, set[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "NEEDS_CLIENTS" for t in node.targets
            ):
                asked[str(path.relative_to(ROOT))] = set(ast.literal_eval(node.value))
    assert len(asked) >= 6, asked  # the modules that run third-party clients
    assert {name: names - known for name, names in asked.items() if names - known} == {}
