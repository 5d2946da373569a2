"""An agent loop on the OpenAI Chat Completions API with toolhub's tools, and nothing else.

    OPENAI_API_KEY=... python examples/openai_agent_loop.py WORKSPACE "What is in notes.txt?"

It shows the three things every host has to get right: each tool call the model makes runs
through ``Session`` (which validates and maps the model's arguments, so nothing here parses
them); what goes back is ``prompt_text`` — the text the model is meant to read, reminders
included — and the images a result carries; and an ``ask_user`` question waits for the answer
the host gives with ``session.answer``.

``OPENAI_BASE_URL`` points it at any server that speaks the API (the tests use a scripted one
on loopback), ``OPENAI_MODEL`` picks the model.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from openai import OpenAI

from toolhub import CallResult, Session

#: Answers ``ask_user``'s questions (``[{"question": ..., "options": [...]}]``), one per question.
AskUser = Callable[[list[dict[str, Any]]], list[str]]


def ask_on_terminal(questions: list[dict[str, Any]]) -> list[str]:
    """The default answerer: the user types each answer."""
    answers = []
    for q in questions:
        options = f" [{' / '.join(q['options'])}]" if q.get("options") else ""
        answers.append(input(f"{q['question']}{options}\n> "))
    return answers


def run_tool(session: Session, name: str, arguments: str, ask: AskUser) -> CallResult:
    """One call, streamed rather than ``call_sync``-ed: ``ask_user`` announces its questions as
    an ``input_required`` progress item and then waits until they are answered."""
    print(f"[tool] {name} {arguments}", file=sys.stderr)
    for item in session.stream_sync(name, arguments):  # the model's JSON string, as it is
        if isinstance(item, CallResult):
            return item
        if item.subkind == "input_required":
            session.answer(item.payload["call_id"], ask(item.payload["questions"]))
    raise RuntimeError("a toolhub stream always ends with its CallResult")


def agent_loop(
    client: OpenAI,
    session: Session,
    task: str,
    model: str,
    ask: AskUser = ask_on_terminal,
    max_turns: int = 50,
) -> str:
    """Ask the model, run the calls it makes, repeat until it answers without calling a tool."""
    # Strict form: the model must send every argument, null meaning "absent"; toolhub agrees.
    tools: Any = session.definitions("openai", strict=True)
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(max_turns):
        reply = client.chat.completions.create(model=model, messages=messages, tools=tools)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [call.model_dump() for call in message.tool_calls],
            }
        )
        images: list[dict[str, Any]] = []
        for call in message.tool_calls:
            assert call.type == "function"  # the only kind of tool offered
            result = run_tool(session, call.function.name, call.function.arguments, ask)
            # Every tool_call_id gets its tool message, before any other message.
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": result.prompt_text}
            )
            for block in result.content:
                if block.type == "image" and block.data:
                    url = f"data:{block.mime_type};base64,{block.data}"
                    images.append({"type": "text", "text": f"Image from call {call.id}:"})
                    images.append({"type": "image_url", "image_url": {"url": url}})
        if images:
            # A tool message holds text only: the Chat API takes images from the user.
            messages.append({"role": "user", "content": images})
    raise RuntimeError(f"no answer after {max_turns} turns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", help="the directory the tools work in")
    parser.add_argument("task", help="what to ask the model")
    args = parser.parse_args()
    client = OpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL"), api_key=_api_key(parser, "OPENAI_API_KEY")
    )
    # read_only: the default tool set without anything that writes or runs commands. Pass
    # your own configuration (a dict or a YAML file, docs/contract.md) for more.
    with Session.embedded(config={"mode": "read_only"}, workspace=args.workspace) as session:
        model = os.environ.get("OPENAI_MODEL", "gpt-4.1")
        print(agent_loop(client, session, args.task, model))


def _api_key(parser: argparse.ArgumentParser, name: str) -> str:
    """The key from the environment, or a one-line hint (exit 2) instead of a traceback."""
    key = os.environ.get(name)
    if not key:
        parser.error(f"set {name} (export {name}=...) to run this example")
    return key


if __name__ == "__main__":
    main()
