"""Strict schemas through each framework's own strict handling, for every tool of the default
tool set: openai-agents keeps every ``FunctionTool`` strict (0 fallbacks) and its schema
unchanged, Pydantic AI's OpenAI schema transformer finds each definition strict-compatible,
and LangChain's strict conversion leaves each schema as toolhub wrote it. The default,
non-strict form is tested beside them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
from pydantic_ai.tools import ToolDefinition

from toolhub import Session
from toolhub.integrations.langchain import langchain_tools
from toolhub.integrations.openai_agents import function_tools
from toolhub.integrations.pydantic_ai import ToolhubToolset


@pytest.fixture
def builtins(tmp_path: Path) -> Iterator[Session]:
    """The default tool set (no config)."""
    session = Session.embedded(None, tmp_path, state_dir=tmp_path / "state")
    yield session
    session.close()


def schemas(session: Session, **options: Any) -> dict[str, dict[str, Any]]:
    return {d["function"]["name"]: d["function"] for d in session.definitions("openai", **options)}


def pydantic_ai_definitions(toolset: ToolhubToolset[None]) -> list[ToolDefinition]:
    """The tool definitions a Pydantic AI model is handed for ``toolset``."""
    seen: list[AgentInfo] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("ok")])

    asyncio.run(Agent(FunctionModel(respond), toolsets=[toolset]).run("list"))
    return seen[0].function_tools


def test_by_default_schemas_go_as_toolhub_lists_them(builtins: Session) -> None:
    expected = schemas(builtins)
    agents_tools = function_tools(builtins)
    assert {t.name: t.params_json_schema for t in agents_tools} == {
        name: d["parameters"] for name, d in expected.items()
    }
    assert not any(t.strict_json_schema for t in agents_tools)
    definitions = pydantic_ai_definitions(ToolhubToolset(builtins))
    assert {d.name: d.parameters_json_schema for d in definitions} == {
        name: d["parameters"] for name, d in expected.items()
    }
    assert {d.strict for d in definitions} == {None}
    assert {t.name: t.args_schema for t in langchain_tools(builtins)} == {
        name: d["parameters"] for name, d in expected.items()
    }


def test_openai_agents_keeps_every_tool_strict_and_its_schema_as_is(builtins: Session) -> None:
    expected = schemas(builtins, strict=True)
    tools = function_tools(builtins, strict=True)
    assert sorted(t.name for t in tools) == sorted(expected)
    assert [t.name for t in tools if not t.strict_json_schema] == [], "fell back to non-strict"
    assert {t.name: t.params_json_schema for t in tools} == {
        name: d["parameters"] for name, d in expected.items()
    }, "the SDK's strict rewrite changed a schema"


def test_pydantic_ai_finds_every_definition_strict_compatible(builtins: Session) -> None:
    definitions = pydantic_ai_definitions(ToolhubToolset(builtins, strict=True))
    assert len(definitions) == len(schemas(builtins, strict=True))
    assert {d.strict for d in definitions} == {True}
    incompatible = []
    for definition in definitions:
        transformer = OpenAIJsonSchemaTransformer(definition.parameters_json_schema, strict=True)
        transformer.walk()
        if not transformer.is_strict_compatible:
            incompatible.append(definition.name)
    assert incompatible == []


def test_langchain_strict_conversion_changes_no_schema(builtins: Session) -> None:
    expected = schemas(builtins, strict=True)
    converted = [
        convert_to_openai_tool(t, strict=True) for t in langchain_tools(builtins, strict=True)
    ]
    assert {c["function"]["name"]: c["function"]["parameters"] for c in converted} == {
        name: d["parameters"] for name, d in expected.items()
    }
