"""toolhub's MCP client against the protocol's reference servers (npm
``@modelcontextprotocol/server-everything`` and ``server-filesystem`` 2026.8.31, installed once
under ``.venv/clients``): their tools listed and called as toolhub external tools, progress
arriving as toolhub ``Progress``, images as content blocks, failures as failed calls.

server-everything registers its elicitation and sampling tools only for a client that declares
those capabilities. toolhub's client declares elicitation (it relays a server's form to its own
caller: ``toolhub/sources/mcp_elicit.py``), not sampling, so the sampling tools are never
offered to a model that could not use them; its elicitation form reaches the caller and the
answers reach the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client_venvs import npm_folder
from tests.gateway.support import make_builder
from tests.http_process import serving
from toolhub import CallResult, Progress, Session
from toolhub.ports import free_port

#: The third-party clients these tests run (built in the background: tests/conftest.py).
NEEDS_CLIENTS = ("reference-servers",)

pytestmark = pytest.mark.timeout(300)

HELLO = "hello from the workspace\n"
#: server-everything's tools that need a client capability toolhub does not declare.
NEEDS_SAMPLING = {"trigger-sampling-request", "trigger-sampling-request-async"}
ELICITING = {"trigger-elicitation-request", "trigger-url-elicitation"}
#: How a user answers server-everything's form, by the words of each field's question.
FORM_ANSWERS = {
    "full, legal name": "Ada Lovelace",
    "terms and conditions": "yes",
    "favorite integer": "7",
    "Favorite number": "2.5",
    "favorite instruments": "Piano, Violin",
    "favorite hero": "Wonder Woman",
    "type of pet": "Dogs",
}


@pytest.fixture(scope="module")
def bins() -> Path:
    try:
        return npm_folder("reference-servers") / ".bin"
    except FileNotFoundError as missing:
        pytest.skip(str(missing))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "hello.txt").write_text(HELLO)
    return path


def _session(tmp_path: Path, workspace: Path, servers: dict[str, Any]) -> Session:
    return Session.embedded(
        {"mcp_servers": servers},
        workspace,
        state_dir=tmp_path / "state",
        builder=make_builder(),
    )


def _external(session: Session, server: str) -> set[str]:
    prefix = f"{server}__"
    return {
        name.removeprefix(prefix) for name in session.toolset.entries if name.startswith(prefix)
    }


def _assert_everything(session: Session) -> None:
    tools = _external(session, "ev")
    assert {"echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"} <= tools
    assert not tools & NEEDS_SAMPLING and tools >= ELICITING, tools

    echoed = session.call_sync("ev__echo", {"message": "hi there"})
    assert not echoed.is_error and "hi there" in echoed.prompt_text, echoed.prompt_text
    assert "5" in session.call_sync("ev__get-sum", {"a": 2, "b": 3}).prompt_text

    weather = session.call_sync("ev__get-structured-content", {"location": "Chicago"})
    assert weather.output is not None and weather.output.value["temperature"] == 36

    image = session.call_sync("ev__get-tiny-image")
    assert [b.mime_type for b in image.content if b.type == "image"] == ["image/png"]

    items = list(
        session.stream_sync("ev__trigger-long-running-operation", {"duration": 1, "steps": 4})
    )
    progress = [i.payload for i in items if isinstance(i, Progress)]
    assert [(p["progress"], p["total"]) for p in progress] == [(i, 4) for i in range(1, 5)]
    result = items[-1]
    assert isinstance(result, CallResult) and not result.is_error
    assert "Long running operation completed" in result.prompt_text

    # Arguments the server's own schema refuses: a failed call the model can read.
    wrong = session.call_sync("ev__get-structured-content", {"location": "Atlantis"})
    assert wrong.is_error and wrong.error is not None, wrong.prompt_text
    assert "location" in wrong.prompt_text, wrong.prompt_text


def test_server_everything_over_stdio(tmp_path: Path, workspace: Path, bins: Path) -> None:
    servers = {"ev": {"command": [str(bins / "mcp-server-everything")]}}
    with _session(tmp_path, workspace, servers) as session:
        _assert_everything(session)


@pytest.fixture
def everything_url(bins: Path, tmp_path: Path) -> Iterator[str]:
    """server-everything on streamable HTTP (``streamableHttp``, its ``PORT``)."""
    port = free_port()
    with serving(
        [str(bins / "mcp-server-everything"), "streamableHttp"],
        f"http://127.0.0.1:{port}/mcp",
        env={"PATH": "/usr/bin:/bin", "PORT": str(port), "HOME": str(tmp_path)},
    ) as url:
        yield url


def test_server_everything_over_streamable_http(
    tmp_path: Path, workspace: Path, everything_url: str
) -> None:
    with _session(tmp_path, workspace, {"ev": {"url": everything_url}}) as session:
        _assert_everything(session)


def test_server_filesystem(tmp_path: Path, workspace: Path, bins: Path) -> None:
    servers = {"fs": {"command": [str(bins / "mcp-server-filesystem"), str(workspace)]}}
    with _session(tmp_path, workspace, servers) as session:
        assert {"read_text_file", "write_file", "list_directory", "edit_file"} <= _external(
            session, "fs"
        )
        read = session.call_sync("fs__read_text_file", {"path": str(workspace / "hello.txt")})
        assert not read.is_error and HELLO.strip() in read.prompt_text, read.prompt_text

        written = session.call_sync(
            "fs__write_file", {"path": str(workspace / "new.txt"), "content": "made by fs"}
        )
        assert not written.is_error, written.prompt_text
        assert (workspace / "new.txt").read_text() == "made by fs"

        listing = session.call_sync("fs__list_directory", {"path": str(workspace)})
        assert "hello.txt" in listing.prompt_text and "new.txt" in listing.prompt_text

        # Outside the directories the server was given: its refusal is a failed call.
        outside = session.call_sync("fs__read_text_file", {"path": "/etc/hostname"})
        assert outside.is_error and outside.error is not None, outside.prompt_text
        assert "denied" in outside.prompt_text.lower(), outside.prompt_text


def test_server_everythings_form_reaches_the_caller(
    tmp_path: Path, workspace: Path, bins: Path
) -> None:
    """Its 13-field form (text, boolean, numbers, formats, single and multi-select choices,
    titled and legacy-titled enums) becomes the caller's questions; the answers go back typed,
    titles as the values they stand for. A URL-mode elicitation is declined."""
    servers = {"ev": {"command": [str(bins / "mcp-server-everything")]}}
    with _session(tmp_path, workspace, servers) as session:
        result = None
        asked: list[dict[str, Any]] = []
        for item in session.stream_sync("ev__trigger-elicitation-request", {}):
            if isinstance(item, Progress) and item.subkind == "input_required":
                asked = item.payload["questions"]
                answers = [
                    next((a for words, a in FORM_ANSWERS.items() if words in q["question"]), "")
                    for q in asked
                ]
                assert session.answer(item.payload["call_id"], answers)
            elif isinstance(item, CallResult):
                result = item
        assert len(asked) == 13 and result is not None and not result.is_error
        assert asked[0]["question"].startswith("MCP server `ev` asks: Please provide inputs")
        text = result.prompt_text
        assert "- Name: Ada Lovelace" in text and "- Agreed to terms: true" in text, text
        assert "- Favorite Integer: 7" in text and "- Favorite Number: 2.5" in text, text
        raw = text[text.index("Raw result:") :]
        for sent in ('"Piano"', '"Violin"', '"hero-3"', '"pet-2"'):
            assert sent in raw, raw
        assert '"Guitar"' not in raw, raw

        url = session.call_sync(
            "ev__trigger-url-elicitation", {"url": "https://example.com/sign-in"}
        )
        assert "decline" in url.prompt_text.lower(), url.prompt_text
