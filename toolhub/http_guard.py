"""What every HTTP request passes before a route sees it, in the gateway and in the MCP server
over streamable HTTP alike: the ``Host`` allowlist, the bearer token (when
``TOOLHUB_API_TOKEN`` is set) and the body size limit. It needs only Starlette, which both the
``[gateway]`` and the ``[mcp]`` extras bring, so ``toolhub mcp`` runs without the gateway
installed.

The ``Host`` check defeats DNS rebinding: a web page on ``rebind.attacker.example`` whose name
the attacker re-points at 127.0.0.1 can make the victim's browser send requests to a gateway on
loopback, but the browser still says ``Host: rebind.attacker.example``. A gateway bound to
loopback answers only its loopback names (``loopback_hosts``); anything else gets
``421 Misdirected Request``, as the MCP SDK's own transport answers. The health probes stay
open to every ``Host`` (a kubelet probes by pod IP).

The token is compared with ``hmac.compare_digest`` so its value cannot be guessed from response
timing. The size limit holds for chunked bodies too: the body is counted as it streams in, and
the route fails with 413 the moment it passes the limit, before it is all buffered.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Collection
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Request body limit when none is configured (``TOOLHUB_MAX_BODY_BYTES`` for the gateway).
DEFAULT_MAX_BODY = 8 * 1024 * 1024
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
#: Answered whatever the ``Host``: probes address a pod by IP.
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server reachable from this machine only."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class UnsafeBind(ValueError):
    """A server asked to listen beyond loopback with nothing authenticating its callers."""


def check_bind(host: str, *, token: str | None, behind_auth_proxy: bool) -> None:
    """Raise ``UnsafeBind`` for a non-loopback ``host`` without a token, unless a proxy in
    front authenticates every request: anyone who reaches an open server can run commands."""
    if is_loopback(host) or token or behind_auth_proxy:
        return
    raise UnsafeBind(
        f"refusing to serve on {host} without a bearer token: anyone who can reach it could "
        "run commands. Set TOOLHUB_API_TOKEN, bind to 127.0.0.1, or set "
        "TOOLHUB_BEHIND_AUTH_PROXY=1 (--behind-auth-proxy) if a proxy in front authenticates "
        "every request"
    )


def flag_env(name: str) -> bool:
    """A yes/no environment variable: ``1``, ``true``, ``yes`` or ``on`` is yes."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def loopback_hosts(bound: str) -> frozenset[str]:
    """The ``Host`` names a server bound to loopback address ``bound`` answers to."""
    return frozenset({*LOOPBACK_NAMES, bound.strip("[]").lower()})


def host_name(header: str) -> str:
    """``Host`` without its port, lower-cased; IPv6 literals without their brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        return value.partition(":")[0]
    return value


class BodyTooLarge(HTTPException):
    """Raised from ``receive``; an HTTPException so the framework answers 413 as it is."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds {limit} bytes")


def tokens_of(token: str) -> list[str]:
    """The accepted tokens: ``TOOLHUB_API_TOKEN`` may list several, comma-separated (one per
    client; each is its own principal for what is bound to one, such as MCP tasks)."""
    return [part.strip() for part in token.split(",") if part.strip()]


def token_ok(header: str | None, token: str) -> bool:
    if not header:
        return False
    scheme, _, provided = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    given = provided.strip().encode()
    # Every token is compared, so the time taken does not tell which one nearly matched.
    matches = [hmac.compare_digest(given, known.encode()) for known in tokens_of(token)]
    return any(matches)


class Guard:
    """ASGI middleware: the ``Host`` allowlist (``None``: any host), auth, then a counting
    ``receive`` that enforces the body limit."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body_bytes: int,
        allowed_hosts: Collection[str] | None = None,
    ) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = (
            None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        public = scope["path"] in PUBLIC_PATHS
        if (
            self.allowed_hosts is not None
            and scope["path"] not in PROBE_PATHS
            and host_name(headers.get("host", "")) not in self.allowed_hosts
        ):
            await _reply(send, 421, "Invalid Host header")
            return
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
