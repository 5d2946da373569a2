"""What every HTTP request passes before a route sees it, in the gateway and in the MCP server
over streamable HTTP alike: the bearer token (when ``TOOLHUB_API_TOKEN`` is set) and the body
size limit. It needs only Starlette, which both the ``[gateway]`` and the ``[mcp]`` extras bring,
so ``toolhub mcp`` runs without the gateway installed.

The token is compared with ``hmac.compare_digest`` so its value cannot be guessed from response
timing. The size limit holds for chunked bodies too: the body is counted as it streams in, and
the route fails with 413 the moment it passes the limit, before it is all buffered.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Request body limit when none is configured (``TOOLHUB_MAX_BODY_BYTES`` for the gateway).
DEFAULT_MAX_BODY = 8 * 1024 * 1024
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect"})


class BodyTooLarge(HTTPException):
    """Raised from ``receive``; an HTTPException so the framework answers 413 as it is."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds {limit} bytes")


def token_ok(header: str | None, token: str) -> bool:
    if not header:
        return False
    scheme, _, provided = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(provided.strip().encode(), token.encode())


class Guard:
    """ASGI middleware: auth, then a counting ``receive`` that enforces the body limit."""

    def __init__(self, app: ASGIApp, *, token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        public = scope["path"] in PUBLIC_PATHS
        if self.token and not public and not token_ok(headers.get("authorization"), self.token):
            await _reply(send, 401, "missing or wrong bearer token", {"www-authenticate": "Bearer"})
            return
        declared = headers.get("content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_body_bytes
            except ValueError:
                await _reply(send, 400, "malformed Content-Length")
                return
            if too_big:
                await _reply(send, 413, f"request body exceeds {self.max_body_bytes} bytes")
                return
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        seen = 0
        limit = self.max_body_bytes

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        return counted


async def _reply(send: Send, status: int, detail: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
