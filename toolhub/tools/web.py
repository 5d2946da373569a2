"""Network tools: ``web_fetch`` (one page as markdown) and ``web_search`` (ranked links).

Both only reach the network through container resources (a ``Resolver``, a
``TransportFactory``, a ``SearchProvider``), so hosts pick the network and tests point them at
local servers. A page that answers 404 is an output the model reads; a URL the guard refuses,
a timeout or a broken upstream is a typed ``ToolError``.
"""

from __future__ import annotations

import logging
import os
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field

from toolhub.backends.http import cancellable, deadline, status_error
from toolhub.backends.providers.fetcher import FetchedPage, TtlCache, fetch, page_text
from toolhub.backends.providers.netguard import NetGuard, Resolver, SystemResolver, TransportFactory
from toolhub.backends.providers.search import SearchHit, SearchProvider, SearxngProvider
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind
from toolhub.errors import ErrorCode

logger = logging.getLogger("toolhub.tools.web")

# -- web_fetch -------------------------------------------------------------------------------------

#: The host's consent to the ``allow_local`` param: an operator setting, not a client's.
ALLOW_LOCAL_ENV = "TOOLHUB_WEB_FETCH_ALLOW_LOCAL"


def local_fetch_permitted() -> bool:
    return os.environ.get(ALLOW_LOCAL_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class WebFetchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cache_ttl_s: float = Field(900.0, ge=0, description="How long a fetched page is reused.")
    cache_max_entries: int = Field(128, ge=0, description="Pages kept in the cache (0: none).")
    timeout_s: float = Field(60.0, gt=0, description="Deadline for the whole fetch.")
    max_body_bytes: int = Field(10 * 1024 * 1024, gt=0, description="Largest body read.")
    max_markdown_chars: int = Field(100_000, gt=0, description="Longest text returned.")
    max_redirects: int = Field(10, ge=0)
    allowed_domains: list[str] = Field(
        default_factory=list, description="When set, only these domains and their subdomains."
    )
    allow_local: bool = Field(
        False,
        description="Allow loopback/private addresses (development only); takes effect only "
        f"where the host process sets {ALLOW_LOCAL_ENV}=1, since a client's config must not "
        "lift the SSRF guard on its own.",
    )
    user_agent: str = "toolhub-web-fetch/0.1"


class WebFetchArgs(BaseModel):
    url: str = Field(description="The http(s) URL to fetch; `https://` is assumed when omitted.")


class WebFetchOutput(BaseModel):
    url: str
    final_url: str
    status_code: int
    content_type: str
    title: str | None = None
    content: str
    truncated: bool = False
    total_chars: int
    redirects: list[str] = Field(default_factory=list)
    from_cache: bool = False

    def model_text(self) -> str:
        lines = [f"URL: {self.final_url}"]
        if self.redirects:
            lines.append(f"Redirected from: {self.url}")
        lines.append(f"Status: {self.status_code}")
        if self.title:
            lines.append(f"Title: {self.title}")
        if self.truncated:
            lines.append(
                f"[Content truncated: showing {len(self.content)} of {self.total_chars} chars]"
            )
        return "\n".join(lines) + "\n\n" + self.content


class PageCache(TtlCache[WebFetchOutput]):
    """The session's cache of fetched pages, keyed by the URL asked for."""


class WebFetch(Tool[WebFetchArgs, WebFetchOutput]):
    id = "web_fetch"
    kind = ToolKind.WEB_FETCH
    params_model = WebFetchParams
    description_template = (
        "Fetch a web page over http(s) and return its content as markdown (HTML is converted; "
        "other text is returned as is). Local and private network addresses are refused. "
        "Results are cached for a few minutes. Use it to read a page you already know the URL "
        "of${% if tools.by_kind.web_search %}; find pages with ${{ tools.by_kind.web_search }}"
        "${% endif %}."
    )

    async def run(self, ctx: ToolContext, args: WebFetchArgs) -> WebFetchOutput:
        params = ctx.container.get_or_default(Params[WebFetchParams])
        url = parse_url(args.url)
        guard = NetGuard(
            ctx.container.get(Resolver) or SystemResolver(),
            allow_local=params.allow_local and local_fetch_permitted(),
            allowed_domains=params.allowed_domains,
        )
        if params.allow_local and not guard.allow_local:
            logger.warning(
                "web_fetch: the config sets allow_local, but %s is not set here: ignored",
                ALLOW_LOCAL_ENV,
            )
        guard.check_url(url)
        cache = ctx.container.get_or_default(PageCache)
        key = str(url)
        cached = cache.get(key, params.cache_ttl_s) if params.cache_ttl_s > 0 else None
        if cached is not None:
            return cached.model_copy(update={"from_cache": True})
        transports = ctx.container.get(TransportFactory) or TransportFactory()

        async def bounded() -> FetchedPage:
            async with deadline(params.timeout_s, f"fetching `{url.host}`"):
                return await fetch(
                    url,
                    guard,
                    transports,
                    max_body_bytes=params.max_body_bytes,
                    max_redirects=params.max_redirects,
                    user_agent=params.user_agent,
                )

        page = await cancellable(ctx.cancel, bounded())
        output = _output(page, params.max_markdown_chars)
        if page.status in (401, 403, 429) or page.status >= 500:
            host = httpx.URL(page.final_url).host
            raise status_error(f"`{host}`", page.status, output.content.encode())
        if 200 <= page.status < 300 and params.cache_max_entries > 0:
            cache.put(key, output, params.cache_max_entries)
        return output


def parse_url(text: str) -> httpx.URL:
    """The model's URL, with ``https://`` assumed when it gave none; malformed is misuse."""
    text = text.strip()
    if "://" not in text:
        text = "https://" + text
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ToolError.invalid_arguments(f"`{text}` is not a valid URL: {exc}") from None
    return url.copy_with(fragment=None)


def _output(page: FetchedPage, max_chars: int) -> WebFetchOutput:
    text = page_text(page)
    content = text.text
    if page.status >= 400 and not content.strip():
        content = f"(HTTP {page.status} {page.reason}, empty body)"
    return WebFetchOutput(
        url=page.url,
        final_url=page.final_url,
        status_code=page.status,
        content_type=page.content_type,
        title=text.title,
        content=content[:max_chars],
        truncated=len(content) > max_chars,
        total_chars=len(content),
        redirects=page.redirects,
    )


# -- web_search ------------------------------------------------------------------------------------


class WebSearchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(30.0, gt=0)
    max_body_bytes: int = Field(2 * 1024 * 1024, gt=0)
    max_results: int = Field(10, ge=1, le=50)


class WebSearchArgs(BaseModel):
    query: str = Field(min_length=1, description="What to search the web for.")
    allowed_domains: list[str] | None = Field(
        None, description="Only return results from these domains (and their subdomains)."
    )


class SearchResult(BaseModel):
    title: str
    url: str
    snippet: str


class WebSearchOutput(BaseModel):
    query: str
    results: list[SearchResult]
    filtered_out: int = 0

    def model_text(self) -> str:
        if not self.results:
            extra = (
                f" ({self.filtered_out} outside the allowed domains)" if self.filtered_out else ""
            )
            return f'No results for "{self.query}"{extra}.'
        blocks = [f'Results for "{self.query}":']
        for n, hit in enumerate(self.results, 1):
            blocks.append(f"{n}. {hit.title or hit.url}\n   {hit.url}\n   {hit.snippet}".rstrip())
        return "\n\n".join(blocks)


class WebSearch(Tool[WebSearchArgs, WebSearchOutput]):
    id = "web_search"
    kind = ToolKind.WEB_SEARCH
    params_model = WebSearchParams
    description_template = (
        "Search the web. Returns titles, URLs and snippets of the top results; narrow them to "
        "some sites with `${{ params.web_search.allowed_domains }}`."
        "${% if tools.by_kind.web_fetch %} Read a result in full with "
        "${{ tools.by_kind.web_fetch }}.${% endif %}"
    )

    async def run(self, ctx: ToolContext, args: WebSearchArgs) -> WebSearchOutput:
        params = ctx.container.get_or_default(Params[WebSearchParams])
        domains = [d for d in map(normalize_domain, args.allowed_domains or []) if d]
        provider = search_provider(ctx, params)
        wanted = params.max_results
        hits = await cancellable(
            ctx.cancel, provider.search(args.query, max_results=wanted * 5 if domains else wanted)
        )
        kept = [h for h in hits if not domains or in_domains(h, domains)]
        return WebSearchOutput(
            query=args.query,
            results=[SearchResult(title=h.title, url=h.url, snippet=h.snippet) for h in kept][
                :wanted
            ],
            filtered_out=len(hits) - len(kept),
        )


def search_provider(ctx: ToolContext, params: WebSearchParams) -> SearchProvider:
    """The container's provider, else one configured from the environment (then cached)."""
    provider = ctx.container.get(SearchProvider)
    if provider is not None:
        return provider
    built = SearxngProvider.from_env(
        timeout_s=params.timeout_s, max_body_bytes=params.max_body_bytes
    )
    if built is None:
        raise ToolError.custom(
            ErrorCode.NOT_CONFIGURED,
            "web search is not configured: set TOOLHUB_SEARCH_URL to a SearxNG instance",
        )
    ctx.container.insert(built, SearchProvider)
    return built


def normalize_domain(text: str) -> str:
    """``https://Docs.Python.org/3/`` → ``docs.python.org``: models pass URLs as domains."""
    text = text.strip().lower()
    host = urlsplit(text if "://" in text else "//" + text).hostname or ""
    return host.strip(".")


def in_domains(hit: SearchHit, domains: list[str]) -> bool:
    host = (urlsplit(hit.url).hostname or "").lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains)


TOOLS: list[type[Tool[Any, Any]]] = [WebFetch, WebSearch]
