"""web_fetch against real HTTP servers on 127.0.0.1, and its SSRF guard."""

from __future__ import annotations

import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.tools.servers.base import LocalServer, Reply
from tests.tools.servers.drive import call, snapshot
from tests.tools.servers.network import PUBLIC_IP, RoutingTransport, StaticResolver
from toolhub.backends.providers.netguard import Resolver, TransportFactory, refusal
from toolhub.backends.workspace import Workspace
from toolhub.core import Container, ErrorKind, Outcome, Params, ToolContext
from toolhub.tools.web import WebFetch, WebFetchOutput, WebFetchParams

PAGE = b"""<!doctype html><html><head><title>Hello page</title>
<style>body{color:red}</style><script>alert('x')</script></head>
<body><h1>Heading</h1><p>Some <b>bold</b> text and a <a href="/next">link</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""
HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        srv.route("GET", "/page", Reply(200, PAGE, HTML))
        yield srv


@pytest.fixture(autouse=True)
def host_allows_local(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test servers are local: this host consents to ``allow_local``."""
    monkeypatch.setenv("TOOLHUB_WEB_FETCH_ALLOW_LOCAL", "1")


def test_allow_local_needs_the_hosts_consent(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client's config alone cannot lift the SSRF guard (issue 13.8)."""
    monkeypatch.delenv("TOOLHUB_WEB_FETCH_ALLOW_LOCAL")
    out = fetch(context(tmp_path, allow_local=True), server.url("/page"))
    assert out.error is not None and out.error.kind is ErrorKind.PERMISSION_DENIED, out
    assert "loopback" in out.error.detail


def context(tmp_path: Path, **params: Any) -> ToolContext:
    container = Container()
    container.insert(Workspace(tmp_path))
    container.insert(WebFetchParams(**params), Params[WebFetchParams])
    return ToolContext(call_id="c1", container=container)


def fetch(ctx: ToolContext, url: str) -> Outcome:
    return call(WebFetch(), ctx, {"url": url})[1]


def page(outcome: Outcome) -> WebFetchOutput:
    assert outcome.error is None, outcome.error
    assert outcome.output is not None
    return outcome.output.parse(WebFetchOutput)


def error_of(outcome: Outcome) -> tuple[ErrorKind, str | None]:
    assert outcome.error is not None, outcome.output
    return outcome.error.kind, outcome.error.code


# -- fetching -----------------------------------------------------------------------------------


def test_html_becomes_markdown(tmp_path: Path, server: LocalServer) -> None:
    out = fetch(context(tmp_path, allow_local=True), server.url("/page"))
    result = page(out)
    assert result.status_code == 200 and result.title == "Hello page"
    assert "# Heading" in result.content and "**bold**" in result.content
    assert "[link](/next)" in result.content and "- one" in result.content
    assert "alert" not in result.content and "color:red" not in result.content
    assert out.text.startswith(f"URL: {server.url('/page')}\nStatus: 200\nTitle: Hello page")


def test_plain_text_and_binary(tmp_path: Path, server: LocalServer) -> None:
    server.route("GET", "/t", Reply(200, b"just text", {"Content-Type": "text/plain"}))
    server.route("GET", "/b", Reply(200, b"\x89PNG....", {"Content-Type": "image/png"}))
    ctx = context(tmp_path, allow_local=True)
    assert page(fetch(ctx, server.url("/t"))).content == "just text"
    assert "8 bytes of `image/png`" in page(fetch(ctx, server.url("/b"))).content


def test_not_found_is_an_output(tmp_path: Path, server: LocalServer) -> None:
    result = page(fetch(context(tmp_path, allow_local=True), server.url("/missing")))
    assert result.status_code == 404 and "not found" in result.content


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (500, ErrorKind.EXECUTION, "upstream_error"),
        (503, ErrorKind.EXECUTION, "upstream_error"),
        (429, ErrorKind.RATE_LIMITED, None),
        (401, ErrorKind.UNAUTHORIZED, None),
        (403, ErrorKind.UNAUTHORIZED, None),
    ],
)
def test_failure_statuses_are_typed_errors(
    tmp_path: Path, server: LocalServer, status: int, kind: ErrorKind, code: str | None
) -> None:
    server.route("GET", "/err", Reply(status, b"boom"))
    out = fetch(context(tmp_path, allow_local=True), server.url("/err"))
    assert error_of(out) == (kind, code)
    assert "boom" in out.error.detail  # type: ignore[union-attr]


def test_timeout(tmp_path: Path, server: LocalServer) -> None:
    server.route("GET", "/slow", Reply(200, b"late", delay_s=5))
    out = fetch(context(tmp_path, allow_local=True, timeout_s=0.3), server.url("/slow"))
    assert error_of(out) == (ErrorKind.TIMEOUT, None)


def test_oversized_bodies_are_refused(tmp_path: Path, server: LocalServer) -> None:
    server.route("GET", "/big", Reply(200, b"x" * 5000, {"Content-Type": "text/plain"}))
    server.route("GET", "/chunked", Reply(200, chunks=[b"y" * 600] * 5))
    ctx = context(tmp_path, allow_local=True, max_body_bytes=1000)
    for path in ("/big", "/chunked"):
        assert error_of(fetch(ctx, server.url(path))) == (ErrorKind.EXECUTION, "response_too_large")


def test_long_content_is_truncated(tmp_path: Path, server: LocalServer) -> None:
    server.route("GET", "/long", Reply(200, b"z" * 500, {"Content-Type": "text/plain"}))
    out = fetch(context(tmp_path, allow_local=True, max_markdown_chars=100), server.url("/long"))
    result = page(out)
    assert result.truncated and len(result.content) == 100 and result.total_chars == 500
    assert "showing 100 of 500 chars" in out.text


def test_cache_reuses_pages_until_ttl(tmp_path: Path, server: LocalServer) -> None:
    ctx = context(tmp_path, allow_local=True)
    first, second = fetch(ctx, server.url("/page")), fetch(ctx, server.url("/page"))
    assert not page(first).from_cache and page(second).from_cache
    assert server.paths().count("/page") == 1
    fresh = context(tmp_path, allow_local=True, cache_ttl_s=0)
    fetch(fresh, server.url("/page"))
    fetch(fresh, server.url("/page"))
    assert server.paths().count("/page") == 3


def test_redirects_are_followed(tmp_path: Path, server: LocalServer) -> None:
    server.route("GET", "/old", Reply(301, headers={"Location": "/page"}))
    result = page(fetch(context(tmp_path, allow_local=True), server.url("/old")))
    assert result.final_url == server.url("/page") and result.redirects == [server.url("/page")]
    server.route("GET", "/loop", Reply(302, headers={"Location": "/loop"}))
    out = fetch(context(tmp_path, allow_local=True, max_redirects=3), server.url("/loop"))
    assert error_of(out) == (ErrorKind.EXECUTION, "too_many_redirects")
    assert server.paths().count("/loop") == 4


def test_cancel_stops_a_slow_fetch(tmp_path: Path, server: LocalServer) -> None:
    server.route("GET", "/slow", Reply(200, b"late", delay_s=5))
    ctx = context(tmp_path, allow_local=True)
    timer = threading.Timer(0.2, ctx.cancel.cancel)
    timer.start()
    assert error_of(fetch(ctx, server.url("/slow"))) == (ErrorKind.CANCELLED, None)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "http://user:pw@example.com/", "http://"]
)
def test_bad_urls_are_invalid_arguments(tmp_path: Path, url: str) -> None:
    (tmp_path / "keep.txt").write_text("keep")
    before = snapshot(tmp_path)
    assert error_of(fetch(context(tmp_path), url))[0] is ErrorKind.INVALID_ARGUMENTS
    assert snapshot(tmp_path) == before


def test_allowed_domains(tmp_path: Path, server: LocalServer) -> None:
    ctx = context(tmp_path, allow_local=True, allowed_domains=["example.org"])
    assert error_of(fetch(ctx, server.url("/page")))[0] is ErrorKind.PERMISSION_DENIED
    assert server.requests == []


# -- SSRF guard ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1.2.3",
        "localhost",
        "localhost.",
        "api.localhost",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "100.64.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[fd00:ec2::254]",
        "[fe80::1]",
        "2130706433",
    ],
)
def test_local_targets_are_refused(tmp_path: Path, server: LocalServer, host: str) -> None:
    out = fetch(context(tmp_path), server.url("/page", host=host))
    assert error_of(out)[0] is ErrorKind.PERMISSION_DENIED, host
    assert "refusing" in out.error.detail  # type: ignore[union-attr]
    assert server.requests == []


def test_names_resolving_to_local_addresses_are_refused(
    tmp_path: Path, server: LocalServer
) -> None:
    ctx = context(tmp_path)
    resolver = StaticResolver({"sneaky.test": ["127.0.0.1"], "mixed.test": [PUBLIC_IP, "10.1.2.3"]})
    ctx.container.insert(resolver, Resolver)
    for name in ("sneaky.test", "mixed.test"):
        out = fetch(ctx, server.url("/page", host=name))
        assert error_of(out)[0] is ErrorKind.PERMISSION_DENIED
        assert "resolves to" in out.error.detail  # type: ignore[union-attr]
    assert server.requests == []


def test_metadata_is_refused_even_when_local_is_allowed(tmp_path: Path) -> None:
    ctx = context(tmp_path, allow_local=True)
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/"):
        out = fetch(ctx, url)
        assert error_of(out)[0] is ErrorKind.PERMISSION_DENIED
        assert "metadata" in out.error.detail  # type: ignore[union-attr]


def _public_network(ctx: ToolContext, extra: dict[str, list[str]]) -> list[str]:
    """``public.test`` resolves to a public address that the network routes to 127.0.0.1."""
    dialled: list[str] = []
    ctx.container.insert(StaticResolver({"public.test": [PUBLIC_IP], **extra}), Resolver)
    ctx.container.insert(TransportFactory(lambda: RoutingTransport({PUBLIC_IP}, dialled)))
    return dialled


def test_public_host_is_fetched_at_its_vetted_address(tmp_path: Path, server: LocalServer) -> None:
    ctx = context(tmp_path)
    dialled = _public_network(ctx, {})
    server.route("GET", "/hop", Reply(302, headers={"Location": "/page"}))
    result = page(fetch(ctx, server.url("/hop", host="public.test")))
    assert result.status_code == 200 and result.title == "Hello page"
    assert dialled == [PUBLIC_IP, PUBLIC_IP]
    assert [r.headers["host"] for r in server.requests] == [f"public.test:{server.port}"] * 2


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.1:{port}/secret",
        "http://internal.test:{port}/secret",
        "http://[::1]:{port}/secret",
        "http://localhost:{port}/secret",
        "http://169.254.169.254/latest/meta-data/",
    ],
)
def test_redirect_to_a_private_address_is_refused(
    tmp_path: Path, server: LocalServer, location: str
) -> None:
    ctx = context(tmp_path)
    dialled = _public_network(ctx, {"internal.test": ["10.0.0.5"]})
    server.route("GET", "/secret", Reply(200, b"TOP SECRET"))
    server.route("GET", "/go", Reply(302, headers={"Location": location.format(port=server.port)}))
    out = fetch(ctx, server.url("/go", host="public.test"))
    assert error_of(out)[0] is ErrorKind.PERMISSION_DENIED
    assert server.paths() == ["/go"] and dialled == [PUBLIC_IP]


def test_rebinding_cannot_swap_the_address(tmp_path: Path, server: LocalServer) -> None:
    """The name is resolved once per hop and the connection uses that answer."""

    class Rebinding(StaticResolver):
        async def resolve(self, host: str, port: int) -> list[Any]:
            answer = await super().resolve(host, port)
            self.table[host] = ["127.0.0.1"]
            return answer

    ctx = context(tmp_path)
    dialled: list[str] = []
    resolver = Rebinding({"public.test": [PUBLIC_IP]})
    ctx.container.insert(resolver, Resolver)
    ctx.container.insert(TransportFactory(lambda: RoutingTransport({PUBLIC_IP}, dialled)))
    assert page(fetch(ctx, server.url("/page", host="public.test"))).status_code == 200
    assert resolver.lookups == ["public.test"] and dialled == [PUBLIC_IP]


@pytest.mark.parametrize(("cert_name", "ok"), [("public.test", True), ("other.test", False)])
def test_tls_is_verified_against_the_name_not_the_pinned_address(
    tmp_path: Path, cert_name: str, ok: bool
) -> None:
    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(cert_name).configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    authority.configure_trust(client_tls)
    with LocalServer(tls=server_tls) as srv:
        srv.route("GET", "/page", Reply(200, PAGE, HTML))
        ctx = context(tmp_path)
        dialled: list[str] = []
        ctx.container.insert(StaticResolver({"public.test": [PUBLIC_IP]}), Resolver)
        factory = TransportFactory(lambda: RoutingTransport({PUBLIC_IP}, dialled, client_tls))
        ctx.container.insert(factory)
        out = fetch(ctx, srv.url("/page", host="public.test"))
    assert dialled == [PUBLIC_IP]
    if ok:
        assert page(out).title == "Hello page"
    else:
        assert error_of(out) == (ErrorKind.CUSTOM, "network_error")
        assert "CERTIFICATE_VERIFY_FAILED" in out.error.detail  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
        ("2002:808:808::1", None),
        ("::ffff:10.0.0.1", "a private address"),
        ("64:ff9b::7f00:1", "a loopback address"),
        ("2002:a9fe:a9fe::", "a cloud metadata address"),
        ("192.0.0.8", "a special-purpose address"),
        ("198.18.0.1", "a private address"),
        ("ff0e::1", "a multicast address"),
        ("fc00::1", "a private address"),
    ],
)
def test_address_policy(address: str, refused: str | None) -> None:
    reason = refusal(ipaddress.ip_address(address), allow_local=False)
    assert (reason or "").startswith(refused or "") and (reason is None) == (refused is None)
