"""Web search providers: the ``SearchProvider`` protocol and a SearxNG implementation.

SearxNG's JSON API (``GET {base}/search?q=...&format=json`` → ``{"results": [{"title", "url",
"content"}, ...]}``) is the one real wire format spoken here; any engine can be added by
implementing the protocol and inserting it into the container.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from toolhub.backends.http import JsonApi

URL_ENV = "TOOLHUB_SEARCH_URL"
KEY_ENV = "TOOLHUB_SEARCH_API_KEY"


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchProvider(Protocol):
    """Query → ranked hits. Raises ``ToolError`` for upstream failures; no hits is ``[]``."""

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]: ...


class SearxngProvider:
    """SearxNG over its JSON API. SearxNG has no API keys of its own: when a key is configured
    it is sent as a bearer token, which is how a SearxNG behind an authenticating proxy is
    usually reached."""

    def __init__(self, api: JsonApi) -> None:
        self.api = api

    @classmethod
    def from_env(
        cls, *, timeout_s: float, max_body_bytes: int, env: Mapping[str, str] | None = None
    ) -> SearxngProvider | None:
        """The provider configured by ``TOOLHUB_SEARCH_URL`` (+ ``TOOLHUB_SEARCH_API_KEY``), or
        None when no URL is set."""
        env = os.environ if env is None else env
        base = env.get(URL_ENV, "").strip()
        if not base:
            return None
        key = env.get(KEY_ENV) or None
        return cls(JsonApi("the search service", base, key, timeout_s, max_body_bytes))

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        async with self.api.client() as client:
            data = await self.api.request_json(
                client, "GET", "search", params={"q": query, "format": "json"}
            )
        results = data.get("results")
        if not isinstance(results, list):
            raise self.api.malformed("`results` is missing or not a list")
        hits = [hit for hit in map(_hit, results) if hit is not None]
        return hits[:max_results]


def _hit(item: Any) -> SearchHit | None:
    """One result; entries without a usable URL are skipped, missing text becomes empty."""
    if not isinstance(item, dict) or not isinstance(item.get("url"), str) or not item["url"]:
        return None
    title = item.get("title")
    content = item.get("content")
    return SearchHit(
        title=title.strip() if isinstance(title, str) else "",
        url=item["url"],
        snippet=content.strip() if isinstance(content, str) else "",
    )
