"""An agent loop on the Anthropic Messages API with toolhub's tools, and nothing else.

    ANTHROPIC_API_KEY=... python examples/anthropic_agent_loop.py WORKSPACE "What is in notes.txt?"

It shows the three things every host has to get right: each ``tool_use`` block runs through
``Session`` (which validates and maps the model's arguments, so nothing here checks them);
what goes back in the ``tool_result`` is ``prompt_text`` — the text the model is meant to read,
reminders included — with the images a result carries beside it; and an ``ask_user`` question
waits for the answer the host gives with ``session.answer``.

``ANTHROPIC_BASE_URL`` points it at any server that speaks the API (the tests use a scripted
one on loopback), ``ANTHROPIC_MODEL`` picks the model.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from anthropic import Anthropic

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


def run_tool(session: Session, name: str, arguments: Any, ask: AskUser) -> CallResult:
    """One call, streamed rather than ``call_sync``-ed: ``ask_user`` announces its questions as
    an ``input_required`` progress item and then waits until they are answered."""
    print(f"[tool] {name} {arguments}", file=sys.stderr)
    for item in session.stream_sync(name, arguments):
        if isinstance(item, CallResult):
            return item
        if item.subkind == "input_required":
            session.answer(item.payload["call_id"], ask(item.payload["questions"]))
    raise RuntimeError("a toolhub stream always ends with its CallResult")


def tool_result(tool_use_id: str, result: CallResult) -> dict[str, Any]:
    """The ``tool_result`` block: the text first, then the result's images as image blocks. A
    failed call is a result too (``is_error``), which the model reads and reacts to."""
    content: list[dict[str, Any]] = [{"type": "text", "text": result.prompt_text or "(empty)"}]
    for block in result.content:
        if block.type == "image" and block.data:
            source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            content.append({"type": "image", "source": source})
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": content,
        "is_error": result.is_error,
    }


def agent_loop(
    client: Anthropic,
    session: Session,
    task: str,
    model: str,
    ask: AskUser = ask_on_terminal,
    max_turns: int = 50,
) -> str:
    """Ask the model, run the tools it uses, repeat until it stops for another reason."""
    tools: Any = session.definitions("anthropic")
    messages: list[Any] = [{"role": "user", "content": task}]
    for _ in range(max_turns):
        reply = client.messages.create(model=model, max_tokens=4096, messages=messages, tools=tools)
        if reply.stop_reason != "tool_use":
            return "".join(block.text for block in reply.content if block.type == "text")
        messages.append({"role": "assistant", "content": reply.content})
        # One user message answers every tool_use block of the turn, tool results first.
        results = [
            tool_result(block.id, run_tool(session, block.name, block.input, ask))
            for block in reply.content
            if block.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})
    raise RuntimeError(f"no answer after {max_turns} turns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", help="the directory the tools work in")
    parser.add_argument("task", help="what to ask the model")
    args = parser.parse_args()
    client = Anthropic(
        base_url=os.environ.get("ANTHROPIC_BASE_URL"), api_key=_api_key(parser, "ANTHROPIC_API_KEY")
    )
    # read_only: the default tool set without anything that writes or runs commands. Pass
    # your own configuration (a dict or a YAML file, docs/contract.md) for more.
    with Session.embedded(config={"mode": "read_only"}, workspace=args.workspace) as session:
        model = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")
        print(agent_loop(client, session, args.task, model))


def _api_key(parser: argparse.ArgumentParser, name: str) -> str:
    """The key from the environment, or a one-line hint (exit 2) instead of a traceback."""
    key = os.environ.get(name)
    if not key:
        parser.error(f"set {name} (export {name}=...) to run this example")
    return key


if __name__ == "__main__":
    main()
