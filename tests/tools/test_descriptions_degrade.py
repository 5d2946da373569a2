"""Descriptions read right whatever the tool set lacks (issue 16): every built-in tool, alone
in a tool set (where its requirements allow), describes itself without an empty name
("`read_file`, `` and ``", "Read files with .") — and with its neighbours present, names
them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolhub import Session
from toolhub.core.template_limits import tool_names
from toolhub.session_parts import default_builder

EMPTY = re.compile(r"``|\bwith \.|\buse \.|\bprefer \.|Prefer\s+over|, ,| and \.")
TOOL_IDS = sorted(default_builder().registry.tools)
#: What a tool that cannot stand alone needs at least (its requirements, nothing more).
COMPANIONS: dict[str, list[dict[str, object]]] = {
    "Main:bash": [],  # with background off below, it requires nothing
    "Main:edit_file": [{"id": "Main:read_file"}],
    "Main:enter_plan_mode": [{"id": "Main:exit_plan_mode"}],
    "Main:exit_plan_mode": [{"id": "Main:enter_plan_mode"}],
    "Main:kill_task": [{"id": "Main:monitor"}],
    "Main:task_output": [{"id": "Main:monitor"}],
    "Main:wait_tasks": [{"id": "Main:monitor"}],
    "Main:search_tool": [{"id": "Main:use_tool"}],
    "OpenCode:edit": [{"id": "OpenCode:read"}],
    "Main:task": [],  # with background off below, it requires nothing
}
ALONE = {
    "Main:bash": {"params": {"enabled_background": False}},
    "Main:task": {"params": {"enabled_background": False}},
}


@pytest.mark.parametrize("tool_id", TOOL_IDS)
def test_a_tool_alone_describes_itself_without_empty_names(tool_id: str, tmp_path: Path) -> None:
    tools = [{"id": tool_id, **ALONE.get(tool_id, {})}, *COMPANIONS.get(tool_id, [])]
    with Session.embedded({"tools": tools}, tmp_path) as session:
        definitions = session.definitions("mcp")
    assert len(definitions) == len(tools)
    for definition in definitions:
        assert not EMPTY.search(definition["description"]), definition["description"]


def test_bash_names_its_neighbours_when_they_are_there(tmp_path: Path) -> None:
    with Session.embedded(None, tmp_path) as session:
        bash = next(d for d in session.definitions("mcp") if d["name"] == "bash")
    assert (
        "Prefer `read_file`, `grep` and `edit_file` over cat, grep and sed."
        in (bash["description"])
    )
    pair = [{"id": "Main:bash", **ALONE["Main:bash"]}, {"id": "Main:read_file"}]
    with Session.embedded({"tools": pair}, tmp_path) as s:
        alone = next(d for d in s.definitions("mcp") if d["name"] == "bash")
    assert "Prefer `read_file` over cat, grep and sed." in alone["description"]


def test_the_names_filter() -> None:
    kinds = {"read": "read_file", "search": "grep"}
    assert tool_names(kinds, "read", "search", "edit") == "`read_file` and `grep`"
    assert tool_names(kinds, "edit") == ""
    assert tool_names(kinds, "read", "search", conjunction="or") == "`read_file` or `grep`"
