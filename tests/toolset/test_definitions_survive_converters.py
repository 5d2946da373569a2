"""Every built-in tool's definition survives each SDK's own schema conversion whole: no
description, bound or required field is lost by google-genai (``Schema.from_json_schema``),
Pydantic AI (its OpenAI strict and Google transformers; its strict-subset check finds every
strict form compatible) or the OpenAI Agents SDK (``ensure_strict_json_schema``, which must
leave the strict form as it is, open objects refused).

google-genai collapses ``anyOf: [X, {"type": "null"}]`` and drops its sibling ``description``;
toolhub spells a nullable value ``type: [t, "null"]``, which it keeps (``core/schema.py``)."""

from __future__ import annotations

import copy

import pytest
from agents.strict_schema import ensure_strict_json_schema
from google.genai import types as genai
from pydantic_ai.profiles.google import GoogleJsonSchemaTransformer
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

from tests.toolset.catalog_schemas import BOUNDS, assert_kept, catalog_definitions

PLAIN = catalog_definitions(strict=False)
STRICT = catalog_definitions(strict=True)


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
    # Its check of OpenAI's strict subset (closed objects, all required, no refused keyword).
    checker = OpenAIJsonSchemaTransformer(copy.deepcopy(STRICT[tool]), strict=None)
    checker.walk()
    assert checker.is_strict_compatible, tool


@pytest.mark.parametrize("tool", sorted(PLAIN))
def test_openai_agents_leaves_the_strict_form_as_it_is(tool: str) -> None:
    schema = STRICT[tool]
    assert ensure_strict_json_schema(copy.deepcopy(schema), _reject_open_objects=True) == schema
