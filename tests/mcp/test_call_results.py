"""How a toolhub result becomes an MCP result: ``structuredContent`` only when the text is its
JSON (clients that prefer it then lose nothing the model must read), otherwise the structured
output in ``_meta["toolhub/output"]`` — which toolhub's own MCP client reads back, so a toolhub
reached over MCP keeps its typed outputs; a failed call's typed error in
``_meta["toolhub/error"]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mcp_types as types

from tests.gateway.support import make_builder
from tests.mcp.stdio_support import ROOT
from toolhub import Session
from toolhub.core import CallResult, ToolError, ToolOutput
from toolhub.distributed.quota import OverQuota, over_quota_error
from toolhub.mcp.call_results import ERROR_META_KEY, to_mcp_result
from toolhub.sources.mcp_outcome import OUTPUT_META_KEY, outcome_of

VALUE = {"city": "Paris", "degrees": 21}


def result(text: str, output: ToolOutput | None) -> CallResult:
    return CallResult(name="weather", prompt_text=text, output=output)


def test_text_that_is_the_json_keeps_structured_content() -> None:
    sent = to_mcp_result(result(json.dumps(VALUE, indent=2), ToolOutput.dynamic(VALUE)))
    assert sent.structured_content == VALUE and sent.meta is None


def test_text_beyond_the_output_moves_it_to_meta() -> None:
    text = "21 degrees in Paris\n\n<system-reminder>\nBackground task done\n</system-reminder>"
    sent = to_mcp_result(result(text, ToolOutput.dynamic(VALUE)))
    assert sent.structured_content is None
    assert sent.meta == {OUTPUT_META_KEY: VALUE}
    (block,) = sent.content
    assert isinstance(block, types.TextContent) and block.text == text


def test_plain_text_and_failures_carry_no_output() -> None:
    plain = to_mcp_result(result("just text", ToolOutput.plain_text("just text")))
    assert plain.structured_content is None and plain.meta is None
    failed = to_mcp_result(CallResult.failure("weather", ToolError.execution("no network")))
    assert failed.is_error and failed.structured_content is None
    assert failed.meta == {ERROR_META_KEY: ToolError.execution("no network").to_dict()}


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
