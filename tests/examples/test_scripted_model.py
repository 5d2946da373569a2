"""The scripted model refuses what the real APIs refuse, so an example that sends it fails its
test: each case is a request one mistake away from a valid one, sent through the real SDK."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from tests.examples.scripted_model import API_KEY, PIXEL, ScriptedModel

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
ASKED = [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [CALL]}]
IMAGE_PART = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
OPEN_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}

#: A case: (what the refusal says, the messages, the one function offered, if any).
OPENAI_CASES: dict[str, tuple[str, list[Any], dict[str, Any]]] = {
    "an image in a tool message": (
        "only allowed for messages with role 'user'",
        [*ASKED, {"role": "tool", "tool_call_id": "call_1", "content": [IMAGE_PART]}],
        {},
    ),
    "a call left unanswered": (
        "must be followed by tool messages",
        [*ASKED, {"role": "user", "content": "well?"}],
        {},
    ),
    "a result for no call": (
        "must be a response to a preceding message",
        [*ASKED, {"role": "tool", "tool_call_id": "call_2", "content": "x"}],
        {},
    ),
    "a strict schema left open": (
        "'additionalProperties' is required",
        [{"role": "user", "content": "go"}],
        {"name": "f", "parameters": OPEN_SCHEMA, "strict": True},
    ),
}

USE = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}
USED = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [USE]}]

#: A case: (what the refusal says, the messages).
ANTHROPIC_CASES: dict[str, tuple[str, list[Any]]] = {
    "a tool_use without its tool_result": (
        "without `tool_result` blocks immediately after",
        [*USED, {"role": "user", "content": "well?"}],
    ),
    "text before the tool_result": (
        "tool_result blocks must come first",
        [*USED, {"role": "user", "content": [{"type": "text", "text": "here"}, RESULT]}],
    ),
    "an empty text block": (
        "text content blocks must be non-empty",
        [
            *USED,
            {"role": "user", "content": [{**RESULT, "content": [{"type": "text", "text": ""}]}]},
        ],
    ),
    "an assistant first": (
        "the first message must use the user role",
        [{"role": "assistant", "content": "hi"}],
    ),
}


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.mark.parametrize("case", OPENAI_CASES)
def test_the_chat_api_refuses(model: ScriptedModel, case: str) -> None:
    says, messages, function = OPENAI_CASES[case]
    client = openai.OpenAI(base_url=f"{model.url}/v1", api_key=API_KEY, max_retries=0)
    tools: Any = [{"type": "function", "function": function}] if function else openai.omit
    with pytest.raises(openai.BadRequestError, match=re.escape(says)):
        client.chat.completions.create(model="m", messages=messages, tools=tools)


@pytest.mark.parametrize("case", ANTHROPIC_CASES)
def test_the_messages_api_refuses(model: ScriptedModel, case: str) -> None:
    client = anthropic.Anthropic(base_url=model.url, api_key=API_KEY, max_retries=0)
    says, messages = ANTHROPIC_CASES[case]
    with pytest.raises(anthropic.BadRequestError, match=re.escape(says)):
        client.messages.create(model="m", max_tokens=10, messages=messages)
