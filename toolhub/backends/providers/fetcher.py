"""Fetching one web page safely, and turning it into text a model can read.

Redirects are followed by hand so that every hop goes through the same checks as the first
(scheme, allowed domains, SSRF vetting after DNS, pinned connection). Bodies are capped while
they stream, HTML becomes markdown, and a small TTL cache spares repeated fetches.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import httpx

from toolhub.backends.http import read_capped, transport_error
from toolhub.core import ToolError
from toolhub.errors import ErrorCode

from .netguard import NetGuard, TransportFactory

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")
HTML_TYPES = ("text/html", "application/xhtml+xml")
_DROPPED_TAGS = ("head", "script", "style", "noscript", "template", "svg", "iframe")

V = TypeVar("V")


@dataclass(slots=True)
class FetchedPage:
    """The final response of a fetch, after redirects."""

    url: str
    final_url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    redirects: list[str] = field(default_factory=list)


async def fetch(
    url: httpx.URL,
    guard: NetGuard,
    transports: TransportFactory,
    *,
    max_body_bytes: int,
    max_redirects: int,
    user_agent: str,
) -> FetchedPage:
    """GET ``url``, following up to ``max_redirects`` redirects, each hop vetted by ``guard``.

    A fresh client per hop: a pooled TLS connection verified for one name must never carry a
    request for another name that happens to share its address.
    """
    current = url
    redirects: list[str] = []
    for _ in range(max_redirects + 1):
        target = await guard.vet(current)
        host = current.host
        headers = {**target.headers(), "User-Agent": user_agent, "Accept": ACCEPT}
        async with httpx.AsyncClient(transport=transports(), trust_env=False) as client:
            request = client.build_request(
                "GET", target.request_url(), headers=headers, extensions=target.extensions()
            )
            try:
                response = await client.send(request, stream=True, follow_redirects=False)
            except httpx.HTTPError as exc:
                raise transport_error(f"`{host}`", exc) from None
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    current = _follow(current, location)
                    redirects.append(str(current))
                    continue
                try:
                    body = await read_capped(response, max_body_bytes, f"`{host}`")
                except httpx.HTTPError as exc:
                    raise transport_error(f"`{host}`", exc) from None
            finally:
                await response.aclose()
        return FetchedPage(
            url=str(url),
            final_url=str(current),
            status=response.status_code,
            reason=response.reason_phrase,
            content_type=response.headers.get("content-type", "").split(";")[0].strip().lower(),
            charset=response.charset_encoding,
            body=body,
            redirects=redirects,
        )
    raise ToolError.execution(
        f"`{url}` redirected more than {max_redirects} times", code=ErrorCode.TOO_MANY_REDIRECTS
    )


def _follow(current: httpx.URL, location: str) -> httpx.URL:
    try:
        return current.join(location)
    except httpx.InvalidURL as exc:
        raise ToolError.execution(
            f"`{current.host}` redirected to an invalid URL: {exc}",
            code=ErrorCode.BAD_UPSTREAM_RESPONSE,
        ) from None


@dataclass(frozen=True, slots=True)
class PageText:
    """What a page says, as markdown or plain text, with its title when it has one."""

    text: str
    title: str | None


def page_text(page: FetchedPage) -> PageText:
    """HTML → markdown (scripts, styles and the head dropped); other text as is; binary types
    are described rather than dumped."""
    kind = page.content_type
    if kind in HTML_TYPES or (not kind and page.body.lstrip()[:1] == b"<"):
        # The HTML parsers load at the first page, not at every process start.
        from bs4 import BeautifulSoup
        from markdownify import MarkdownConverter

        soup = BeautifulSoup(page.body, "html.parser", from_encoding=page.charset)
        title = soup.title.get_text(" ", strip=True) if soup.title else None
        for tag in soup(_DROPPED_TAGS):
            tag.decompose()
        markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
        return PageText(_tidy(markdown), title or None)
    if not kind or kind.startswith(TEXT_TYPES) or kind.endswith(("+json", "+xml")):
        return PageText(page.body.decode(page.charset or "utf-8", "replace"), None)
    return PageText(f"[{len(page.body)} bytes of `{kind}` content, not shown as text]", None)


def _tidy(markdown: str) -> str:
    """Collapse the runs of blank lines that converted layouts leave behind."""
    lines: list[str] = []
    for line in markdown.splitlines():
        stripped = line.rstrip()
        if stripped or (lines and lines[-1]):
            lines.append(stripped)
    return "\n".join(lines).strip()


class TtlCache(Generic[V]):
    """A small LRU cache whose entries also expire; safe to share between threads."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, ttl_s: float) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            stored, value = entry
            if time.monotonic() - stored > ttl_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: str, value: V, max_entries: int) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > max_entries:
                self._entries.popitem(last=False)
