"""The Hashline namespace in a tool set (issue 17): validation (exclusive with the Main and
Codex file tools, scheme params checked and shared), descriptions that follow the params and
the client's names, strict definitions, and a session round trip with renamed arguments."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from agents.strict_schema import ensure_strict_json_schema
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

from toolhub import Session
from toolhub.session_parts import default_builder

HASHLINE = [
    {"id": "Hashline:hashline_read"},
    {"id": "Hashline:hashline_edit"},
    {"id": "Hashline:hashline_grep"},
]
RENAMED = {
    "tools": [
        {"id": "Hashline:hashline_read", "name": "view", "rename": {"offset": "start"}},
        {"id": "Hashline:hashline_edit", "name": "patch", "rename": {"edits": "changes"}},
        {"id": "Hashline:hashline_grep", "name": "find", "rename": {"limit": "max_hits"}},
    ]
}


def violations(tools: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    report = default_builder().validate({"tools": tools})
    return [(v.tool, v.category, v.field_path) for v in report.violations]


def test_hashline_tools_stand_with_tools_of_other_families() -> None:
    tools = [
        *HASHLINE,
        {"id": "Main:glob"},
        {"id": "Main:bash", "params": {"enabled_background": False}},
    ]
    assert violations(tools) == []
    assert violations(HASHLINE[1:2]) == []


@pytest.mark.parametrize(
    "other",
    ["Main:read_file", "Main:edit_file", "Main:grep", "Main:write_file", "Codex:apply_patch"],
)
def test_mixing_with_other_file_tools_is_a_variant_conflict(other: str) -> None:
    found = violations([*HASHLINE, {"id": other, "name": "other_tool"}])
    conflicts = {tool for tool, category, _ in found if category == "variant_conflict"}
    assert conflicts == {other, *(t["id"] for t in HASHLINE)}
    report = default_builder().validate({"tools": [HASHLINE[0], {"id": other, "name": "x"}]})
    assert "keep one namespace" in report.violations[0].message


@pytest.mark.parametrize(
    ("params", "category", "field"),
    [
        ({"hash_len": 0}, "params_constraint", "params.hash_len"),
        ({"hash_len": 5}, "params_constraint", "params.hash_len"),
        ({"hash_len": "three"}, "params_type", "params.hash_len"),
        ({"scheme": "sha256"}, "params_unknown_variant", "params.scheme"),
        ({"chunk_size": 0}, "params_constraint", "params.chunk_size"),
        ({"salt": "x"}, "params_unknown_field", "params.salt"),
    ],
)
def test_bad_scheme_params_are_config_violations(
    params: dict[str, Any], category: str, field: str
) -> None:
    tools = [{"id": "Hashline:hashline_read", "params": params}]
    assert violations(tools) == [("Hashline:hashline_read", category, field)]


def test_the_three_tools_must_share_one_params_value(tmp_path: Path) -> None:
    found = violations([{"id": "Hashline:hashline_read", "params": {"hash_len": 2}}, *HASHLINE[1:]])
    assert {(t, c) for t, c, _ in found} == {(t["id"], "requirements") for t in HASHLINE}
    report = default_builder().validate(
        {"tools": [{"id": "Hashline:hashline_read", "params": {"hash_len": 2}}, *HASHLINE[1:]]}
    )
    assert "same `scheme`, `hash_len` and `chunk_size`" in report.violations[0].message
    config = tmp_path / "toolset.yaml"
    config.write_text(
        "tools:\n"
        "  - {id: 'Hashline:hashline_read', params: &scheme {scheme: content_only, hash_len: 2}}\n"
        "  - {id: 'Hashline:hashline_edit', params: *scheme}\n"
        "  - {id: 'Hashline:hashline_grep', params: *scheme}\n"
    )
    assert default_builder().validate(config).ok


def test_descriptions_follow_params_and_client_names(tmp_path: Path) -> None:
    tools = copy.deepcopy(RENAMED["tools"])
    for tool in tools:
        tool["params"] = {"hash_len": 2}
    with Session.embedded({"tools": tools}, tmp_path) as session:
        described = {d["name"]: d["description"] for d in session.definitions("mcp")}
    assert "`12:a3|text`" in described["view"] and "2-character hash" in described["view"]
    assert "Edit with `patch`" in described["view"] and "continue at `start`" in described["view"]
    assert (
        "as `view` shows them" in described["patch"] and "Each of `changes`" in described["patch"]
    )
    assert "`patch` can change it directly" in described["find"]


def test_session_round_trip_with_renamed_arguments(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("".join(f"x{n} = {n}\n" for n in range(1, 31)))
    with Session.embedded(RENAMED, tmp_path) as session:
        page = session.call_sync("view", {"path": "a.py", "start": 10, "limit": 5})
        assert not page.is_error and page.prompt_text.endswith("Continue with `start`: 15.]")
        anchor = re.match(r"(\d+:\w+)\|", page.prompt_text.split("\n")[1]).group(1)  # line 11
        done = session.call_sync(
            "patch",
            {"path": "a.py", "changes": [{"op": "replace", "anchor": anchor, "content": "y = 0"}]},
        )
        assert not done.is_error and done.output.value["status"] == "applied"
        again = session.call_sync(
            "patch", {"path": "a.py", "changes": [{"op": "delete", "anchor": anchor}]}
        )
        assert again.output.value["status"] == "stale" and "changes[0].anchor" in again.prompt_text
        assert "read the file again with `view`" in again.prompt_text
        found = session.call_sync("find", {"pattern": "x", "max_hits": 2})
        assert "raise `max_hits`" in found.prompt_text
    assert (tmp_path / "a.py").read_text().split("\n")[10] == "y = 0"


def test_definitions_are_strict_and_nulls_mean_absent(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("one\ntwo\n")
    with Session.embedded({"tools": HASHLINE}, tmp_path) as session:
        for definition in session.definitions("openai", strict=True):
            schema = definition["function"]["parameters"]
            assert (
                ensure_strict_json_schema(copy.deepcopy(schema), _reject_open_objects=True)
                == schema
            )
            checker = OpenAIJsonSchemaTransformer(copy.deepcopy(schema), strict=None)
            checker.walk()
            assert checker.is_strict_compatible, definition["function"]["name"]
        read = session.call_sync("hashline_read", {"path": "n.txt", "offset": None, "limit": None})
        assert not read.is_error, read.prompt_text
        anchor = read.prompt_text.split("|")[0]
        edit = {"op": "insert_after", "anchor": anchor, "end_anchor": None, "content": "1.5"}
        done = session.call_sync("hashline_edit", {"path": "n.txt", "edits": [edit]})
        assert not done.is_error, done.prompt_text
        found = session.call_sync(
            "hashline_grep",
            {
                "pattern": "two",
                "path": None,
                "glob": None,
                "case_insensitive": None,
                "context": None,
                "limit": None,
            },
        )
        assert not found.is_error and "|two" in found.prompt_text
    assert (tmp_path / "n.txt").read_text() == "one\n1.5\ntwo\n"
