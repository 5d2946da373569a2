"""HTTP plumbing shared by every network tool: bounded requests and one error vocabulary.

Each upstream (a web page, a search engine, an images or video API) fails in the same few ways,
and the model should read the same typed error for each: a deadline passed (``timeout``), the
service refused us (``unauthorized``, ``rate_limited``), it broke (``execution`` with code
``upstream_error``), it was unreachable (``network_error``) or it sent something we will not
read (``response_too_large``, ``bad_upstream_response``). Every wait has a deadline, every body
a byte cap, and every call can be cancelled from another thread at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from toolhub.core import CancelToken, ErrorKind, ToolError
from toolhub.errors import ErrorCode

T = TypeVar("T")

EXCERPT_CHARS = 300


async def cancellable(cancel: CancelToken, work: Awaitable[T]) -> T:
    """Await ``work`` but give up the moment ``cancel`` fires (from any thread).

    Cancelling the inner task closes its sockets, so an in-flight request stops at once rather
    than when its own timeout would have ended it.
    """
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise ToolError.cancelled()
    return task.result()


@asynccontextmanager
async def deadline(seconds: float, what: str) -> AsyncIterator[None]:
    """Bound a whole exchange (connect, headers, body) by one deadline: a server that trickles
    bytes never outlives it, unlike httpx's per-operation timeouts."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise ToolError.timeout(f"{what} did not finish within {seconds:g} s") from None


def status_error(service: str, status: int, body: bytes) -> ToolError:
    """The typed error for an HTTP failure status, carrying the upstream's own message."""
    message = upstream_message(body)
    detail = f"{service} answered HTTP {status}" + (f": {message}" if message else "")
    if status in (401, 403):
        return ToolError(ErrorKind.UNAUTHORIZED, detail, {"status": status})
    if status == 429:
        return ToolError(ErrorKind.RATE_LIMITED, detail, {"status": status})
    code = ErrorCode.UPSTREAM_ERROR if status >= 500 else ErrorCode.UPSTREAM_REJECTED
    return ToolError.execution(detail, code=code, status=status)


def transport_error(service: str, exc: httpx.HTTPError) -> ToolError:
    if isinstance(exc, httpx.TimeoutException):
        return ToolError.timeout(f"{service} timed out: {type(exc).__name__}")
    return ToolError.custom(
        ErrorCode.NETWORK_ERROR, f"could not reach {service}: {type(exc).__name__}: {exc}"
    )


def upstream_message(body: bytes) -> str:
    """A short human message from an error body: ``error.message`` / ``error`` / ``detail`` of
    a JSON body when present, else the start of the text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:EXCERPT_CHARS]
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:EXCERPT_CHARS]
        for key in ("error", "detail", "message"):
            if isinstance(data.get(key), str):
                return str(data[key])[:EXCERPT_CHARS]
    return text[:EXCERPT_CHARS]


async def read_capped(response: httpx.Response, limit: int, service: str) -> bytes:
    """The body, refusing (before and while reading) anything above ``limit`` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(service, limit, int(declared))
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise _too_large(service, limit, None)
    return bytes(body)


def _too_large(service: str, limit: int, declared: int | None) -> ToolError:
    size = f" ({declared} bytes declared)" if declared is not None else ""
    return ToolError.execution(
        f"{service} sent a response larger than the {limit}-byte cap{size}",
        code=ErrorCode.RESPONSE_TOO_LARGE,
        limit=limit,
    )


@dataclass(frozen=True, slots=True)
class JsonApi:
    """One configured HTTP API (base URL, bearer key, deadline, body cap).

    It holds configuration only: connection pools belong to one event loop, so ``client()``
    opens a fresh one per call and the API object can be cached in a container for good.
    """

    service: str
    base_url: str
    api_key: str | None = None
    timeout_s: float = 60.0
    max_body_bytes: int = 10 * 1024 * 1024

    def client(self) -> httpx.AsyncClient:
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return httpx.AsyncClient(
            base_url=self.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=self.timeout_s,
            trust_env=False,
            follow_redirects=False,
        )

    async def request(
        self, client: httpx.AsyncClient, method: str, path: str, **kwargs: Any
    ) -> bytes:
        """The body of a 2xx answer; any other status, a cap breach or a transport failure is
        the matching ``ToolError``."""
        async with deadline(self.timeout_s, self.service):
            try:
                async with client.stream(method, path.lstrip("/"), **kwargs) as response:
                    body = await read_capped(response, self.max_body_bytes, self.service)
            except httpx.HTTPError as exc:
                raise transport_error(self.service, exc) from None
        if not 200 <= response.status_code < 300:
            raise status_error(self.service, response.status_code, body)
        return body

    async def request_json(
        self, client: httpx.AsyncClient, method: str, path: str, **kwargs: Any
    ) -> Mapping[str, Any]:
        """A 2xx answer that must be a JSON object (anything else is ``bad_upstream_response``)."""
        body = await self.request(client, method, path, **kwargs)
        try:
            data = json.loads(body)
        except ValueError:
            raise self.malformed(f"not JSON: {body[:80]!r}") from None
        if not isinstance(data, dict):
            raise self.malformed(f"expected a JSON object, got {type(data).__name__}")
        return data

    def malformed(self, what: str) -> ToolError:
        return ToolError.execution(
            f"{self.service} sent a malformed response: {what}",
            code=ErrorCode.BAD_UPSTREAM_RESPONSE,
        )
