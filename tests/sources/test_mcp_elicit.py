"""An external MCP server's questions during a call reach toolhub's own caller, as ``ask_user``'s
do (``toolhub/sources/mcp_elicit.py``), and the caller's answers go back to the server.

The server that asks is a real ``toolhub mcp --transport http`` whose ``ask_user`` is called
as an external tool: on a handshake-era connection it asks with ``elicitation/create``, on a
2026-07-28 one with an ``InputRequiredResult`` (the call retried with the answers). A stdio
server that asks with ``elicitation/create`` shows what happens when the question names no
call and two calls are in flight. The form-to-questions mapping is checked on hostile forms.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import yaml
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.http_process import serving
from tests.mcp.stdio_support import TOOLHUB, toolhub_args, toolhub_env
from tests.sources.test_mcp_client import changing
from toolhub import CallResult, Progress, Session
from toolhub.ports import free_port
from toolhub.sources.mcp_elicit import MAX_FIELDS, Form

pytestmark = pytest.mark.timeout(180)

TOKEN = "tok"
COLOUR = {"question": "Which colour?", "options": ["blue", "red"]}


@pytest.fixture(scope="module")
def inner_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server that asks: ``toolhub mcp`` on streamable HTTP."""
    home = tmp_path_factory.mktemp("inner")
    (home / "ws").mkdir()
    port = free_port()
    with serving(
        [TOOLHUB, *toolhub_args(home / "ws", "--transport", "http", "--port", str(port))],
        f"http://127.0.0.1:{port}/mcp",
        env={**toolhub_env(home), "TOOLHUB_API_TOKEN": TOKEN},
        ready=lambda answer: answer.status_code == 401,
    ) as url:
        yield url


def _session(tmp_path: Path, servers: dict[str, Any], **params: Any) -> Session:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    config: dict[str, Any] = {"mcp_servers": servers}
    if params:
        config["tools"] = [{"id": "Main:ask_user", "params": params}]
    return Session.embedded(config, workspace, state_dir=tmp_path / "state")


def _answering(
    session: Session, tool: str, args: dict[str, Any], answer: list[str] | None
) -> tuple[list[dict[str, Any]], CallResult]:
    """Stream a call; answer each question it relays with ``answer`` (None: never answer)."""
    asked: list[dict[str, Any]] = []
    result = None
    for item in session.stream_sync(tool, args):
        if isinstance(item, Progress) and item.subkind == "input_required":
            asked.append(item.payload)
            if answer is not None:
                assert session.answer(item.payload["call_id"], answer)
        elif isinstance(item, CallResult):
            result = item
    assert result is not None
    return asked, result


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
def test_a_remote_ask_user_reaches_the_caller_and_gets_its_answer(
    tmp_path: Path, inner_url: str, modern: bool
) -> None:
    server = {"url": inner_url, "headers": {"Authorization": f"Bearer {TOKEN}"}, "tasks": modern}
    with _session(tmp_path, {"inner": server}) as session:
        asked, result = _answering(session, "inner__ask_user", {"questions": [COLOUR]}, ["blue"])
        assert len(asked) == 1, (asked, result.prompt_text)
        (question,) = asked[0]["questions"]
        assert question["question"].startswith("MCP server `inner` asks: ")
        assert "Which colour?" in question["question"]
        assert question["options"] == ["blue", "red"]
        assert not result.is_error, result.prompt_text
        assert "Q: Which colour?\nA: blue" in result.prompt_text, result.prompt_text

        # An answer outside the form's choices is not sent on: the server hears "decline".
        _, refused = _answering(session, "inner__ask_user", {"questions": [COLOUR]}, ["green"])
        assert "A: green" not in refused.prompt_text, refused.prompt_text


def test_a_stdio_server_asking_during_one_call_is_answered(tmp_path: Path) -> None:
    with _session(tmp_path, {"dyn": changing(tmp_path)}) as session:
        asked, result = _answering(session, "dyn__ask", {}, ["Ada"])
        assert [q["question"] for q in asked[0]["questions"]] == [
            "MCP server `dyn` asks: Your name?\nname"
        ]
        assert result.prompt_text == "answered: accept", result.prompt_text


def test_an_mcp_client_of_toolhub_answers_the_remote_question(tmp_path: Path) -> None:
    """The whole chain: an ``mcp`` SDK client of ``toolhub mcp`` (2026-07-28) calls an external
    tool whose server asks; the question reaches that client as toolhub's own ``ask_user``
    questions do (an ``input_required`` form), and its answer reaches the server."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = tmp_path / "toolhub.yaml"
    config.write_text(yaml.safe_dump({"mcp_servers": {"dyn": changing(tmp_path)}}))
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"q1": "Ada"})

    async def body() -> types.CallToolResult:
        params = StdioServerParameters(
            command=TOOLHUB,
            args=toolhub_args(workspace, "--config", str(config)),
            env=toolhub_env(tmp_path),
            cwd=workspace,
        )
        async with Client(params, elicitation_callback=elicit) as client:
            return await client.call_tool("dyn__ask", {})

    result = asyncio.run(body())
    assert result.is_error is False, result
    assert result.content[0].text == "answered: accept"  # type: ignore[union-attr]
    (form,) = asked
    assert "MCP server `dyn` asks: Your name?" in form.message  # type: ignore[union-attr]


def test_a_question_naming_no_call_among_two_is_cancelled(tmp_path: Path) -> None:
    """``elicitation/create`` names no call; with two in flight on the link, nobody is asked."""
    with _session(tmp_path, {"dyn": changing(tmp_path)}) as session:
        running = threading.Event()
        slow: list[CallResult] = []

        def call_slow() -> None:
            for item in session.stream_sync("dyn__slow", {"seconds": 4}):
                running.set()  # its first progress: in flight on the link
                if isinstance(item, CallResult):
                    slow.append(item)

        thread = threading.Thread(target=call_slow)
        thread.start()
        try:
            assert running.wait(60)
            asked, result = _answering(session, "dyn__ask", {}, ["Ada"])
        finally:
            thread.join(60)
        assert asked == []
        assert result.prompt_text == "answered: cancel", result.prompt_text
        assert slow and not slow[0].is_error


def test_a_non_interactive_session_declines_at_once(tmp_path: Path) -> None:
    with _session(tmp_path, {"dyn": changing(tmp_path)}, non_interactive=True) as session:
        asked, result = _answering(session, "dyn__ask", {}, None)
        assert asked == [] and result.prompt_text == "answered: decline"


# -- the form, as the server's word ------------------------------------------------------------


def _form(schema: dict[str, Any], message: str = "Tell me") -> Form:
    return Form("srv", types.ElicitRequestFormParams(message=message, requested_schema=schema))


def test_fields_become_questions_and_answers_their_typed_values() -> None:
    form = _form(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "description": "in full"},
                "age": {"type": "integer"},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean"},
                "size": {"type": "string", "enum": ["s", "m"]},
                "tier": {
                    "type": "string",
                    "oneOf": [{"const": "t1", "title": "Basic"}, {"const": "t2", "title": "Pro"}],
                },
                "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
            },
            "required": ["name"],
        }
    )
    questions = form.questions
    assert questions[0] == {"question": "MCP server `srv` asks: Tell me\nName: in full"}
    assert [q.get("options") for q in questions[3:]] == [
        ["yes", "no"],
        ["s", "m"],
        ["Basic", "Pro"],
        ["Cats", "Dogs"],
        ["a", "b", "c"],
    ]
    assert questions[-1]["question"].endswith("(one or more, separated by commas)")
    result = form.result(["Ada", "36", "0.5", "yes", "m", "Pro", "Dogs", "a, c"])
    assert result.action == "accept"
    assert result.content == {
        "name": "Ada",
        "age": 36,
        "ratio": 0.5,
        "ok": True,
        "size": "m",
        "tier": "t2",
        "pet": "p2",
        "tags": ["a", "c"],
    }
    # Optional fields left unanswered are left out; answers may come by question text too.
    assert form.result(["Ada"]).content == {"name": "Ada"}
    assert form.result({questions[0]["question"]: "Bo"}).content == {"name": "Bo"}


@pytest.mark.parametrize(
    "answers",
    [
        ["", "1"],
        ["Ada", "thirty"],
        ["Ada", "1", "x"],
        ["Ada", "1", "1", "maybe"],
        ["Ada", "1", "1", "no", "z"],
        ["Ada", "1", "1", "no", "a, z"],
    ],
    ids=[
        "required-left-out",
        "not-an-integer",
        "not-a-number",
        "not-yes-or-no",
        "not-a-choice",
        "not-all-choices",
    ],
)
def test_an_answer_that_does_not_fit_its_field_is_not_sent(answers: list[str]) -> None:
    form = _form(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
            },
            "required": ["name"],
        }
    )
    with pytest.raises(Exception) as refused:
        form.result(answers)
    assert type(refused.value).__name__ == "_Refused"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}},
        {
            "type": "object",
            "properties": {f"f{n}": {"type": "string"} for n in range(MAX_FIELDS + 1)},
        },
        {"type": "object", "properties": {"nested": {"type": "object", "properties": {}}}},
        {"type": "object", "properties": {"list": {"type": "array", "items": {"type": "string"}}}},
        {"type": "object", "properties": {"odd": "not a schema"}},
        {"type": "string"},
    ],
    ids=["no-fields", "too-many", "nested-object", "array", "not-a-dict", "not-an-object"],
)
def test_a_form_outside_the_protocols_flat_primitives_is_not_relayed(schema: Any) -> None:
    with pytest.raises(Exception) as refused:
        _form(schema)
    assert type(refused.value).__name__ == "_Refused"


def test_the_servers_text_is_clipped() -> None:
    form = _form({"type": "object", "properties": {"a": {"type": "string"}}}, "x" * 100_000)
    assert len(form.questions[0]["question"]) < 2200
