"""How a toolhub result becomes an MCP result: ``structuredContent`` only when the text is its
JSON (clients that prefer it then lose nothing the model must read), otherwise the structured
output in ``_meta["toolhub/output"]``, only for a client that declared the ``toolhub/output``
extension — toolhub's own MCP client does and reads it back, so a toolhub reached over MCP
keeps its typed outputs, while a client that shows ``_meta`` to its model (Google ADK,
LlamaIndex) never reads the output twice; a failed call's typed error in
``_meta["toolhub/error"]``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.gateway.support import make_builder
from tests.mcp.stdio_support import ROOT
from toolhub import Session
from toolhub.core import CallResult, ToolError, ToolOutput
from toolhub.distributed.quota import OverQuota, over_quota_error
from toolhub.mcp.call_results import ERROR_META_KEY, OUTPUT_EXTENSION, for_client, to_mcp_result
from toolhub.sources.mcp_outcome import OUTPUT_META_KEY, outcome_of

VALUE = {"city": "Paris", "degrees": 21}


def result(text: str, output: ToolOutput | None) -> CallResult:
    return CallResult(name="weather", prompt_text=text, output=output)


def test_text_that_is_the_json_keeps_structured_content() -> None:
    sent = to_mcp_result(result(json.dumps(VALUE, indent=2), ToolOutput.dynamic(VALUE)))
    assert sent.structured_content == VALUE and sent.meta is None


def test_text_beyond_the_output_moves_it_to_meta_for_a_client_that_asked() -> None:
    text = "21 degrees in Paris\n\n<system-reminder>\nBackground task done\n</system-reminder>"
    sent = to_mcp_result(result(text, ToolOutput.dynamic(VALUE)), with_output=True)
    assert sent.structured_content is None
    assert sent.meta == {OUTPUT_META_KEY: VALUE}
    (block,) = sent.content
    assert isinstance(block, types.TextContent) and block.text == text
    # Any other client gets the text alone: nothing a model could read twice.
    plain = to_mcp_result(result(text, ToolOutput.dynamic(VALUE)))
    assert plain.structured_content is None and plain.meta is None


def test_a_stored_result_is_trimmed_for_each_client() -> None:
    """A task's result is stored whole; each poll gets what its own client declared."""
    failed = CallResult.failure("weather", ToolError.execution("no network"))
    stored = to_mcp_result(failed, with_output=True).model_dump(by_alias=True, exclude_none=True)
    assert for_client(stored, with_output=True) == stored
    # The typed error stays, less its detail (the text's own words).
    error = {k: v for k, v in stored["_meta"][ERROR_META_KEY].items() if k != "detail"}
    assert for_client(stored, with_output=False) == {**stored, "_meta": {ERROR_META_KEY: error}}
    text = "21 degrees in Paris"
    whole = to_mcp_result(result(text, ToolOutput.dynamic(VALUE)), with_output=True)
    wire = whole.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert for_client(wire, with_output=True) == wire
    trimmed = for_client(wire, with_output=False)
    assert "_meta" not in trimmed and trimmed["content"] == wire["content"]


def test_plain_text_and_failures_carry_no_output() -> None:
    plain = to_mcp_result(result("just text", ToolOutput.plain_text("just text")))
    assert plain.structured_content is None and plain.meta is None
    failed = to_mcp_result(CallResult.failure("weather", ToolError.execution("no network")))
    assert failed.is_error and failed.structured_content is None
    error = ToolError.execution("no network").to_dict()
    # The text says it; a client that shows ``_meta`` to its model (ADK, LlamaIndex) would
    # show the detail twice: only toolhub's own client, which asks, gets it again there.
    assert failed.meta == {ERROR_META_KEY: {k: v for k, v in error.items() if k != "detail"}}
    assert failed.content[0].text.endswith("no network")  # type: ignore[union-attr]
    asked = to_mcp_result(
        CallResult.failure("weather", ToolError.execution("no network")), with_output=True
    )
    assert asked.meta == {ERROR_META_KEY: error}
    stored = asked.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert for_client(stored, with_output=False)["_meta"] == failed.meta


def test_a_refusal_over_a_quota_carries_its_typed_error() -> None:
    """The model reads that it was refused and when to retry; a program reads the quota and
    ``retry_after`` in ``_meta``."""
    error = over_quota_error("acme", OverQuota("concurrent_calls", 4, 1.0))
    sent = to_mcp_result(CallResult.failure("bash", error))
    assert sent.is_error
    text = sent.content[0].text  # type: ignore[union-attr]
    assert "at most 4 calls in flight at once" in text and "retry after 1 s" in text
    assert sent.meta is not None
    details = sent.meta[ERROR_META_KEY]["details"]
    assert sent.meta[ERROR_META_KEY]["kind"] == "rate_limited"
    assert details["quota"] == "concurrent_calls" and details["retry_after"] == 1.0


def test_the_client_reads_the_output_back_from_meta() -> None:
    sent = types.CallToolResult(
        content=[types.TextContent(type="text", text="21 degrees in Paris")],
        meta={OUTPUT_META_KEY: VALUE},
    )
    outcome = outcome_of(sent, "External:hub__weather")
    assert outcome.output is not None and outcome.output.value == VALUE


def test_toolhub_over_mcp_keeps_typed_outputs(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    server = {
        "command": [sys.executable, "-m", "tests.mcp.mcp_test_server", str(inner)],
        "env": {"PYTHONPATH": str(ROOT)},
    }
    (tmp_path / "ws").mkdir()
    config = {"mcp_servers": {"inner": server}}
    with Session.embedded(
        config, tmp_path / "ws", state_dir=tmp_path / "state", builder=make_builder()
    ) as session:
        echoed = session.call_sync("inner__echo", {"text": "hi"})
    assert echoed.prompt_text == "echo: hi"
    assert echoed.output is not None and echoed.output.value == {"echoed": "hi"}


async def _echo_over_mcp(workspace: Path, *, declare: bool, modern: bool) -> types.CallToolResult:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp.mcp_test_server", str(workspace)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    extensions = {OUTPUT_EXTENSION: {}} if declare else None
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, extensions=extensions) as session,
    ):
        await (session.discover() if modern else session.initialize())
        return await session.call_tool("echo", {"text": "hi"})


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "handshake"])
def test_only_a_client_that_declared_it_gets_the_structured_copy(
    tmp_path: Path, modern: bool
) -> None:
    """The real ``mcp`` SDK client of toolhub's MCP server, in both protocol eras: without the
    extension, the model's text and nothing else; with it, the typed output in ``_meta``."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    plain = asyncio.run(_echo_over_mcp(workspace, declare=False, modern=modern))
    assert [block.text for block in plain.content] == ["echo: hi"]  # type: ignore[union-attr]
    assert plain.structured_content is None
    assert OUTPUT_META_KEY not in (plain.meta or {})
    asked = asyncio.run(_echo_over_mcp(workspace, declare=True, modern=modern))
    assert asked.meta is not None and asked.meta[OUTPUT_META_KEY] == {"echoed": "hi"}
