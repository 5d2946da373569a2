"""Every built-in tool's definition survives each SDK's own schema conversion whole: no
description, bound or required field is lost by google-genai (``Schema.from_json_schema``),
Pydantic AI (its OpenAI strict and Google transformers) or the OpenAI Agents SDK
(``ensure_strict_json_schema``, which must leave the strict form as it is).

google-genai collapses ``anyOf: [X, {"type": "null"}]`` and drops its sibling ``description``;
toolhub spells a nullable value ``type: [t, "null"]``, which it keeps (``core/schema.py``)."""

from __future__ import annotations

import copy
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from agents.strict_schema import ensure_strict_json_schema
from google.genai import types as genai
from pydantic_ai.profiles.google import GoogleJsonSchemaTransformer
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

from toolhub import Session
from toolhub.tools import CATALOG

#: Keywords a converter may not drop, and google-genai's names for them.
BOUNDS = {
    "minimum": "minimum",
    "maximum": "maximum",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
}


def catalog_definitions(strict: bool) -> dict[str, dict[str, Any]]:
    """Every catalog tool's parameters (by tool id), built in one session per tool family
    (a family's tools need each other)."""
    families: dict[str, list[str]] = defaultdict(list)
    for tool in CATALOG.tools:
        families[tool.fq_id().split(":")[0]].append(tool.fq_id())
    found: dict[str, dict[str, Any]] = {}
    for ids in families.values():
        config = {"tools": [{"id": fq} for fq in ids]}
        with Session.embedded(config, tempfile.mkdtemp()) as session:
            for fq, definition in zip(
                ids, session.definitions("openai", strict=strict), strict=True
            ):
                found[fq] = definition["function"]["parameters"]
    assert len(found) == len(CATALOG.tools)
    return found


PLAIN = catalog_definitions(strict=False)
STRICT = catalog_definitions(strict=True)


def properties(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Each property schema, nested objects' and array items' included, by its path."""
    for name, prop in (schema.get("properties") or {}).items():
        where = f"{path}{name}"
        yield where, prop
        for inner in (prop, prop.get("items") or {}):
            if isinstance(inner, dict) and inner.get("properties"):
                yield from properties(inner, where + ".")


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for part in path.split("."):
        props = node.get("properties") or (node.get("items") or {}).get("properties")
        assert props is not None and part in props, f"{path}: lost"
        node = props[part]
    return node


def assert_kept(tool: str, before: dict[str, Any], after: dict[str, Any], names=None) -> None:
    names = names or {key: key for key in BOUNDS}
    assert sorted(after.get("required", [])) == sorted(before.get("required", [])), tool
    for path, prop in properties(before):
        got = at(after, path)
        if "description" in prop:
            assert prop["description"] in (got.get("description") or ""), f"{tool}.{path}"
        for key, name in names.items():
            if key in prop:
                assert got.get(name) == prop[key] or f"{key}" in (got.get("description") or ""), (
                    f"{tool}.{path}: {key} lost"
                )


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_google_genai_keeps_every_description_and_bound(tool: str) -> None:
    for source in (PLAIN, STRICT):
        schema = source[tool]
        converted = genai.Schema.from_json_schema(
            json_schema=genai.JSONSchema(**schema), api_option="GEMINI_API"
        ).model_dump(exclude_none=True)
        assert_kept(tool, schema, converted, BOUNDS)


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_pydantic_ai_keeps_every_description_and_bound(tool: str) -> None:
    google = GoogleJsonSchemaTransformer(copy.deepcopy(PLAIN[tool])).walk()
    assert_kept(tool, PLAIN[tool], google)
    openai = OpenAIJsonSchemaTransformer(copy.deepcopy(STRICT[tool]), strict=True).walk()
    assert_kept(tool, STRICT[tool], openai)


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_openai_agents_leaves_the_strict_form_as_it_is(tool: str) -> None:
    schema = STRICT[tool]
    assert ensure_strict_json_schema(copy.deepcopy(schema)) == schema
