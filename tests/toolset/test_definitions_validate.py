"""Every built-in tool's definition under the jsonschema, openai and anthropic packages' own
schema code (issue 39): what each does with a toolhub schema, run, not assumed.

- jsonschema: every form is a valid schema of the dialect it declares (Draft 2020-12 when it
  declares none), and jsonschema's verdict on a set of arguments is toolhub's own.
- openai: the SDK sends a raw tool's schema as given. Its client-side code is a check that
  every tool handed to ``chat.completions.parse`` is ``strict: true``
  (``openai.lib._parsing._completions.validate_input_tools``) and the strict rewrite behind
  ``pydantic_function_tool`` (``openai.lib._pydantic._ensure_strict_json_schema``), which must
  find nothing to change in toolhub's strict form.
- anthropic: the SDK sends ``input_schema`` as given, ``strict`` or not (``beta_tool``,
  ``mcp_tool``). Its ``transform_schema`` (the structured-output rewrite, exported for anyone's
  schema) takes one type name per schema: it fails on toolhub's nullable spelling
  ``type: [t, "null"]`` (an ``AssertionError`` from its ``assert_never``), and keeps every
  description, bound and required field of a schema spelled without it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import beta_tool
from anthropic.lib.tools.mcp import mcp_tool
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for
from mcp.types import Tool as MCPTool
from openai.lib._parsing._completions import validate_input_tools
from openai.lib._pydantic import _ensure_strict_json_schema

from tests.toolset.catalog_schemas import assert_kept, catalog_definitions, families
from toolhub import Session
from toolhub.core import ErrorKind, ToolError

PLAIN = catalog_definitions(strict=False)
STRICT = catalog_definitions(strict=True)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Session, str]]]:
    """Each catalog tool's session (one per family) and client name, by tool id."""
    found: dict[str, tuple[Session, str]] = {}
    with ExitStack() as stack:
        for config in families():
            session = stack.enter_context(Session.embedded(config, tmp_path_factory.mktemp("ws")))
            for tool, listed in zip(config["tools"], session.definitions("mcp"), strict=True):
                found[tool["id"]] = (session, listed["name"])
        yield found


def test_every_form_listed_is_the_plain_or_the_strict_schema(
    sessions: dict[str, tuple[Session, str]],
) -> None:
    """So checking ``PLAIN`` and ``STRICT`` checks every form a client is sent; no definition
    carries an output schema."""
    for session in {id(s): s for s, _ in sessions.values()}.values():
        ids = [fq for fq, (s, _) in sessions.items() if s is session]
        plain = [PLAIN[fq] for fq in ids]
        strict = [STRICT[fq] for fq in ids]
        assert [d["input_schema"] for d in session.definitions("anthropic")] == plain
        mcp = session.definitions("mcp")
        assert [d["inputSchema"] for d in mcp] == plain
        assert [d["inputSchema"] for d in session.definitions("mcp", strict=True)] == strict
        assert not any("outputSchema" in d for d in mcp)


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_jsonschema_finds_every_form_valid_for_its_dialect(tool: str) -> None:
    for schema in (PLAIN[tool], STRICT[tool]):
        validator_for(schema, default=Draft202012Validator).check_schema(schema)


def sample(schema: dict[str, Any], nulls: bool = False) -> Any:
    """The least value ``schema`` takes: required properties only, the first enum value, an
    array of as many items as it needs, a string of the length it needs; ``nulls``: ``null``
    wherever it is allowed (what a strict-mode model sends for an optional parameter)."""
    kinds = schema.get("type")
    if nulls and (
        (isinstance(kinds, list) and "null" in kinds) or {"type": "null"} in schema.get("anyOf", [])
    ):
        return None
    if "anyOf" in schema:
        return sample(schema["anyOf"][0], nulls)
    if "enum" in schema:
        return schema["enum"][0]
    kind = next(k for k in kinds if k != "null") if isinstance(kinds, list) else kinds
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample(props[name], nulls) for name in schema.get("required", [])}
    if kind == "array":
        return [sample(schema["items"], nulls) for _ in range(schema.get("minItems", 0))]
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "x" * max(1, schema.get("minLength", 1))


def wrong(schema: dict[str, Any]) -> Any:
    """A value of a type ``schema`` does not take."""
    kinds = schema.get("type")
    return "not a list" if kinds == "array" or "array" in (kinds or []) else 12345


#: Where toolhub's validator takes more than its schema says, on purpose: ``use_tool`` lists
#: ``tool_input`` as text (strict mode cannot say "any object"), and still takes an object;
#: the task tools take one id, or ids with commas between, as text where a list is listed.
LENIENT = {
    ("Main:use_tool", "tool_input"),
    ("Main:task_output", "task_ids"),
    ("Main:wait_tasks", "task_ids"),
}


def toolhub_accepts(session: Session, name: str, arguments: dict[str, Any]) -> bool:
    """toolhub's verdict: the validation a call goes through before it runs (nothing runs)."""
    try:
        session.toolset.prepare(name, arguments, "validate-1")
    except ToolError as err:
        assert err.kind == ErrorKind.INVALID_ARGUMENTS, err
        return False
    return True


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_jsonschema_and_toolhub_agree_on_arguments(
    tool: str, sessions: dict[str, tuple[Session, str]]
) -> None:
    session, name = sessions[tool]
    plain, strict = PLAIN[tool], STRICT[tool]
    least = sample(plain)
    cases = [{}, least, {**least, "bogus": 1}]
    for field, prop in plain["properties"].items():
        if (tool, field) not in LENIENT:
            cases.append({**least, field: wrong(prop)})
    verdicts = []
    for arguments in cases:
        expected = Draft202012Validator(plain).is_valid(arguments)
        assert toolhub_accepts(session, name, arguments) == expected, arguments
        verdicts.append(expected)
    assert any(verdicts) and not all(verdicts), "one accepted and one refused case per tool"
    nulls = sample(strict, nulls=True)
    assert set(nulls) == set(strict["properties"])
    assert Draft202012Validator(strict).is_valid(nulls)
    assert toolhub_accepts(session, name, nulls)


def test_openai_parse_takes_the_strict_listing_and_refuses_the_plain_one(
    sessions: dict[str, tuple[Session, str]],
) -> None:
    for session in {id(s): s for s, _ in sessions.values()}.values():
        strict = session.definitions("openai", strict=True)
        assert validate_input_tools(strict) == strict
        with pytest.raises(ValueError, match="is not strict"):
            validate_input_tools(session.definitions("openai"))


@pytest.mark.parametrize("tool", sorted(STRICT))
def test_openai_strict_rewrite_finds_nothing_to_change(tool: str) -> None:
    schema = copy.deepcopy(STRICT[tool])
    assert _ensure_strict_json_schema(schema, path=(), root=schema) == STRICT[tool]


def _unused(**_: Any) -> Any:
    raise AssertionError("not invoked")


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_anthropic_sends_the_schema_as_given(tool: str) -> None:
    schema = PLAIN[tool]
    for strict in (None, True):
        built = beta_tool(_unused, name="t", description="d", input_schema=schema, strict=strict)
        assert built.to_dict()["input_schema"] == schema
        listed = MCPTool(name="t", inputSchema=copy.deepcopy(schema))
        assert mcp_tool(listed, None, strict=strict).to_dict()["input_schema"] == schema  # type: ignore[arg-type]


def type_lists(schema: Any) -> bool:
    """Whether ``schema`` spells a type as a list anywhere (toolhub's nullable)."""
    if isinstance(schema, dict):
        return isinstance(schema.get("type"), list) or any(map(type_lists, schema.values()))
    return isinstance(schema, list) and any(map(type_lists, schema))


def as_any_of(schema: Any) -> Any:
    """``schema`` with each ``type: [t, "null"]`` spelled ``anyOf: [{t, ...}, null]``, the
    nullable's keywords inside its non-null branch."""
    if isinstance(schema, list):
        return [as_any_of(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: as_any_of(value) for key, value in schema.items()}
    kinds = out.get("type")
    if isinstance(kinds, list) and "null" in kinds:
        (kind,) = [k for k in kinds if k != "null"]
        return {"anyOf": [{**out, "type": kind}, {"type": "null"}]}
    return out


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_anthropic_transform_schema_keeps_all_but_fails_on_type_lists(tool: str) -> None:
    for schema in (PLAIN[tool], STRICT[tool]):
        if type_lists(schema):
            with pytest.raises(AssertionError, match="unreachable"):
                anthropic.transform_schema(copy.deepcopy(schema))
            schema = as_any_of(schema)
            assert not type_lists(schema)
        converted = anthropic.transform_schema(copy.deepcopy(schema))
        assert_kept(tool, schema, converted)
