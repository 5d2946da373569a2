"""External tools' arguments are checked against their ``input_schema`` before dispatch
(issue 16: ``{"a": 1}`` against ``required: [a, b]`` went through): the handler never sees a
bad call, a good one passes, and a hostile schema cannot stall the check."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from toolhub import Session
from toolhub.core import ToolContext
from toolhub.sources.merge import ExternalSources, SourceTool
from toolhub.toolset import ExternalSpec

SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "minimum": 0},
        "b": {"type": "string", "enum": ["x", "y"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}


def _session(tmp_path: Path, schema: dict[str, Any], seen: list[dict[str, Any]]) -> Session:
    session = Session.embedded({"tools": [{"id": "Main:read_file"}]}, tmp_path)

    async def handler(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        seen.append(args)
        return {"ok": True}

    sources = ExternalSources.of(session.toolset)
    assert sources.put("test", SourceTool(ExternalSpec("srv__add", "Add.", schema), handler))
    return session


def test_bad_calls_never_reach_the_handler(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    with _session(tmp_path, SCHEMA, seen) as session:
        for args, says in [
            ({"a": 1}, "'b' is a required property"),
            ({"a": -1, "b": "x"}, "`a`: -1 is less than the minimum of 0"),
            ({"a": 1, "b": "z"}, "`b`: 'z' is not one of"),
            ({"a": "1", "b": "x"}, "`a`: '1' is not of type 'integer'"),
            ({"a": 1, "b": "x", "tags": ["p", "q", "r"]}, "`tags`"),
            ({"a": 1, "b": "x", "extra": 1}, "extra"),
        ]:
            result = session.call_sync("srv__add", args)
            assert result.error is not None and result.error.kind == "invalid_arguments", args
            assert says in result.error.detail, (args, result.error.detail)
        assert seen == []
        ok = session.call_sync("srv__add", {"a": 1, "b": "x"})
        assert ok.error is None and seen == [{"a": 1, "b": "x"}]


def test_a_hostile_pattern_is_left_to_the_server(tmp_path: Path) -> None:
    """``(a+)+$`` against 40 a's and a b backtracks for minutes in ``re``: never evaluated."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    seen: list[dict[str, Any]] = []
    with _session(tmp_path, schema, seen) as session:
        started = time.monotonic()
        result = session.call_sync("srv__add", {"s": "a" * 40 + "b"})
        assert time.monotonic() - started < 20  # the backtracking takes minutes
        assert result.error is None and len(seen) == 1


def test_a_schema_that_is_not_json_schema_is_not_checked(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    with _session(tmp_path, {"type": "object", "required": "a"}, seen) as session:
        assert session.call_sync("srv__add", {}).error is None and len(seen) == 1


def test_schemas_compile_at_the_first_call_and_are_shared(tmp_path: Path) -> None:
    """Registration does not pay the meta-schema check (a 500-tool server took 1.3 s); the
    first call does, and equal schemas of other sessions reuse the compiled check."""
    import copy

    from toolhub.toolset.external import ExternalTool
    from toolhub.toolset.external_check import ArgumentCheck

    seen: list[dict[str, Any]] = []
    session = _session(tmp_path, SCHEMA, seen)
    handle = session.toolset.lookup("srv__add").handle
    assert isinstance(handle, ExternalTool)
    assert "_check" not in vars(handle), "compiled at registration"
    refused = session.call_sync("srv__add", {"a": -1, "b": "x"})
    assert refused.is_error and "minimum" in refused.prompt_text
    assert "_check" in vars(handle)
    other = _session(tmp_path, copy.deepcopy(SCHEMA), [])
    other_handle = other.toolset.lookup("srv__add").handle
    assert isinstance(other_handle, ExternalTool)
    assert other.call_sync("srv__add", {"a": 1, "b": "y"}).is_error is False
    assert other_handle._check is handle._check
    assert ArgumentCheck.for_schema({**SCHEMA, "required": ["a"]}) is not handle._check
    assert seen == []
