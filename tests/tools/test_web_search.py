"""web_search through the SearxNG provider, against a local server speaking SearxNG's JSON API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools.servers.base import Reply
from tests.tools.servers.drive import call, snapshot
from tests.tools.servers.searxng import SearxngServer, result
from toolhub.backends.http import JsonApi
from toolhub.backends.providers.search import SearchProvider, SearxngProvider
from toolhub.backends.workspace import Workspace
from toolhub.core import Container, ErrorKind, Outcome, Params, ToolContext
from toolhub.tools.web import WebSearch, WebSearchOutput, WebSearchParams

RESULTS = [
    result("Python docs", "https://docs.python.org/3/library/asyncio.html", "asyncio is ..."),
    result("Blog", "https://blog.example.com/asyncio", "A post"),
    result("Mirror", "https://python.org.evil.example/x", "not python.org"),
    {"title": "no url"},
    result("Peps", "https://peps.python.org/pep-3156/", ""),
]


@pytest.fixture
def searx() -> Iterator[SearxngServer]:
    with SearxngServer(RESULTS) as srv:
        yield srv


def context(
    tmp_path: Path, srv: SearxngServer, key: str | None = None, **params: Any
) -> ToolContext:
    container = Container()
    container.insert(Workspace(tmp_path))
    settings = WebSearchParams(**params)
    container.insert(settings, Params[WebSearchParams])
    api = JsonApi("the search service", srv.url(), key, settings.timeout_s, settings.max_body_bytes)
    container.insert(SearxngProvider(api), SearchProvider)
    return ToolContext(call_id="s1", container=container)


def search(ctx: ToolContext, **args: Any) -> Outcome:
    return call(WebSearch(), ctx, args)[1]


def hits(outcome: Outcome) -> WebSearchOutput:
    assert outcome.error is None, outcome.error
    assert outcome.output is not None
    return outcome.output.parse(WebSearchOutput)


def error_of(outcome: Outcome) -> tuple[ErrorKind, str | None]:
    assert outcome.error is not None, outcome.output
    return outcome.error.kind, outcome.error.code


def test_results_have_titles_urls_and_snippets(tmp_path: Path, searx: SearxngServer) -> None:
    out = search(context(tmp_path, searx, key="k-123"), query="python asyncio")
    found = hits(out)
    assert [h.title for h in found.results] == ["Python docs", "Blog", "Mirror", "Peps"]
    assert found.results[0].url == "https://docs.python.org/3/library/asyncio.html"
    assert found.results[0].snippet == "asyncio is ..."
    (request,) = searx.requests
    assert request.query == {"q": ["python asyncio"], "format": ["json"]}
    assert request.headers["authorization"] == "Bearer k-123"
    assert "1. Python docs\n   https://docs.python.org/3/library/asyncio.html" in out.text


def test_allowed_domains_filter(tmp_path: Path, searx: SearxngServer) -> None:
    ctx = context(tmp_path, searx)
    found = hits(
        search(ctx, query="q", allowed_domains=["https://Python.org/", "blog.example.com"])
    )
    assert [h.url for h in found.results] == [
        "https://docs.python.org/3/library/asyncio.html",
        "https://blog.example.com/asyncio",
        "https://peps.python.org/pep-3156/",
    ]
    assert found.filtered_out == 1


def test_max_results(tmp_path: Path, searx: SearxngServer) -> None:
    assert len(hits(search(context(tmp_path, searx, max_results=2), query="q")).results) == 2


def test_no_results_is_an_output(tmp_path: Path, searx: SearxngServer) -> None:
    searx.results = []
    out = search(context(tmp_path, searx), query="zzzz")
    assert hits(out).results == [] and out.text == 'No results for "zzzz".'


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (400, ErrorKind.EXECUTION, "upstream_rejected"),
        (401, ErrorKind.UNAUTHORIZED, None),
        (403, ErrorKind.UNAUTHORIZED, None),
        (429, ErrorKind.RATE_LIMITED, None),
        (500, ErrorKind.EXECUTION, "upstream_error"),
        (502, ErrorKind.EXECUTION, "upstream_error"),
    ],
)
def test_failure_statuses(
    tmp_path: Path, searx: SearxngServer, status: int, kind: ErrorKind, code: str | None
) -> None:
    searx.reply = Reply(status, json.dumps({"error": {"message": "nope"}}).encode())
    out = search(context(tmp_path, searx), query="q")
    assert error_of(out) == (kind, code)
    assert out.error is not None and out.error.detail.endswith(f"HTTP {status}: nope")


def test_timeout(tmp_path: Path, searx: SearxngServer) -> None:
    searx.reply = Reply(200, b"{}", delay_s=5)
    out = search(context(tmp_path, searx, timeout_s=0.3), query="q")
    assert error_of(out) == (ErrorKind.TIMEOUT, None)


def test_oversized_body(tmp_path: Path, searx: SearxngServer) -> None:
    searx.results = [result("t", f"https://e.com/{n}", "s" * 200) for n in range(50)]
    out = search(context(tmp_path, searx, max_body_bytes=2000), query="q")
    assert error_of(out) == (ErrorKind.EXECUTION, "response_too_large")


@pytest.mark.parametrize("body", [b"<html>oops</html>", b"[1, 2]", b'{"results": "x"}', b"{"])
def test_malformed_json(tmp_path: Path, searx: SearxngServer, body: bytes) -> None:
    searx.reply = Reply(200, body, {"Content-Type": "application/json"})
    out = search(context(tmp_path, searx), query="q")
    assert error_of(out) == (ErrorKind.EXECUTION, "bad_upstream_response")


def test_unreachable_service(tmp_path: Path, searx: SearxngServer) -> None:
    ctx = context(tmp_path, searx)
    port = searx.port
    searx.__exit__(None, None, None)
    api = JsonApi("the search service", f"http://127.0.0.1:{port}", None, 2.0, 1000)
    ctx.container.insert(SearxngProvider(api), SearchProvider)
    assert error_of(search(ctx, query="q")) == (ErrorKind.CUSTOM, "network_error")


def test_configured_from_environment(
    tmp_path: Path, searx: SearxngServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_SEARCH_URL", searx.url("/"))
    monkeypatch.setenv("TOOLHUB_SEARCH_API_KEY", "env-key")
    container = Container()
    ctx = ToolContext(call_id="s2", container=container)
    assert len(hits(search(ctx, query="q")).results) == 4
    assert searx.requests[0].headers["authorization"] == "Bearer env-key"
    assert isinstance(container.get(SearchProvider), SearxngProvider)


def test_bad_input_and_missing_config(
    tmp_path: Path, searx: SearxngServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "notes.md").write_text("keep")
    before = snapshot(tmp_path)
    ctx = context(tmp_path, searx)
    assert error_of(search(ctx, query=""))[0] is ErrorKind.INVALID_ARGUMENTS
    assert error_of(search(ctx, query="q", allowed_domains="x"))[0] is ErrorKind.INVALID_ARGUMENTS
    monkeypatch.delenv("TOOLHUB_SEARCH_URL", raising=False)
    bare = ToolContext(call_id="s3", container=Container())
    assert error_of(search(bare, query="q")) == (ErrorKind.CUSTOM, "not_configured")
    assert snapshot(tmp_path) == before and searx.requests == []
