"""What every HTTP request passes before a route sees it, in the gateway and in the MCP server
over streamable HTTP alike: one ``Authorization`` and one ``Host`` header, the ``Host``
allowlist, the caller's principal (a ``TOOLHUB_API_TOKEN`` token or a named API key, see
``toolhub.tenancy.keys``) and the body size limit. It needs only Starlette, which both the
``[gateway]`` and the ``[mcp]`` extras bring, so ``toolhub mcp`` runs without the gateway
installed.

The ``Host`` check defeats DNS rebinding: a web page on ``rebind.attacker.example`` whose name
the attacker re-points at 127.0.0.1 can make the victim's browser send requests to a gateway on
loopback, but the browser still says ``Host: rebind.attacker.example``. A gateway bound to
loopback answers only its loopback names (``loopback_hosts``); anything else gets
``421 Misdirected Request``, as the MCP SDK's own transport answers. The health probes stay
open to every ``Host`` (a kubelet probes by pod IP).

A request with two ``Authorization`` or two ``Host`` headers is refused (400): which of the two
counts differs between readers, so a proxy in front could vet one while the app used the other.

The principal is left in the ASGI scope (``scope["state"]["principal"]``, ``principal_in``) for
what the request reaches: the gateway scopes sessions by its tenant, the MCP server binds its
sessions and tasks to it. Credentials are compared with ``hmac.compare_digest`` so they cannot
be guessed from response timing. The size limit holds for chunked bodies too: the body is
counted as it streams in, and the route fails with 413 the moment it passes the limit, before
it is all buffered.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from collections.abc import Collection
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolhub.tenancy.keys import Principals, Unauthorized
from toolhub.tenancy.principal import Principal

logger = logging.getLogger("toolhub.http_guard")

#: Request body limit when none is configured (``TOOLHUB_MAX_BODY_BYTES`` for the gateway).
DEFAULT_MAX_BODY = 8 * 1024 * 1024
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
#: Answered whatever the ``Host``: probes address a pod by IP.
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: Headers a request may carry once.
SINGLE_HEADERS = frozenset({"authorization", "host"})
#: Where in ``scope["state"]`` the Guard leaves the request's principal (``request.state.principal``
#: in a route).
PRINCIPAL = "principal"


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


def check_bind(
    host: str, *, token: str | None, behind_auth_proxy: bool, keys: bool = False
) -> None:
    """Raise ``UnsafeBind`` for a non-loopback ``host`` with neither a token nor named API
    ``keys``, unless a proxy in front authenticates every request: anyone who reaches an open
    server can run commands."""
    if is_loopback(host) or token or keys or behind_auth_proxy:
        return
    raise UnsafeBind(
        f"refusing to serve on {host} without a bearer token: anyone who can reach it could "
        "run commands. Set TOOLHUB_API_TOKEN or create API keys (toolhub keys create), bind "
        "to 127.0.0.1, or set TOOLHUB_BEHIND_AUTH_PROXY=1 (--behind-auth-proxy) if a proxy in "
        "front authenticates every request"
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


class Guard:
    """ASGI middleware: one ``Authorization`` and one ``Host`` header at most, the ``Host``
    allowlist (``None``: any host), the caller's principal (``principals``, else one built
    from ``token``) left in the scope for the app (``principal_in``), then a counting
    ``receive`` that enforces the body limit. Every refusal is logged at WARNING, with the
    principal when one is known, never with a credential."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None = None,
        principals: Principals | None = None,
        max_body_bytes: int,
        allowed_hosts: Collection[str] | None = None,
    ) -> None:
        self.app = app
        self.principals = principals if principals is not None else Principals(token)
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = (
            None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            if name in SINGLE_HEADERS and name in headers:
                # Two of them: a proxy may have checked one while the app reads the other.
                await _refuse(scope, send, 400, f"duplicate {name.title()} header")
                return
            headers[name] = raw_value.decode("latin-1")
        path = scope["path"]
        if (
            self.allowed_hosts is not None
            and path not in PROBE_PATHS
            and host_name(headers.get("host", "")) not in self.allowed_hosts
        ):
            await _refuse(scope, send, 421, "Invalid Host header")
            return
        principal = None
        if path not in PUBLIC_PATHS:
            try:
                principal = self.principals.resolve(headers.get("authorization"))
            except Unauthorized as refused:
                await _refuse(
                    scope, send, 401, refused.reason, {"www-authenticate": "Bearer"}, refused.key_id
                )
                return
            # A dict of this request's own: the server's ``state`` may be shared.
            scope["state"] = {**scope.get("state", {}), PRINCIPAL: principal}
        declared = headers.get("content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_body_bytes
            except ValueError:
                await _refuse(scope, send, 400, "malformed Content-Length", who=principal)
                return
            if too_big:
                detail = f"request body exceeds {self.max_body_bytes} bytes"
                await _refuse(scope, send, 413, detail, who=principal)
                return
        await self.app(scope, self._counting(receive, scope, principal), send)

    def _counting(self, receive: Receive, scope: Scope, who: Principal | None) -> Receive:
        seen = 0
        limit = self.max_body_bytes

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    _log_refusal(scope, 413, f"streamed body exceeds {limit} bytes", who)
                    raise BodyTooLarge(limit)
            return message

        return counted


def principal_in(scope: Scope) -> Principal | None:
    """The principal ``Guard`` found for this request (None on a public path)."""
    found = scope.get("state", {}).get(PRINCIPAL)
    return found if isinstance(found, Principal) else None


def _log_refusal(scope: Scope, status: int, detail: str, who: Principal | str | None) -> None:
    """One WARNING line: what was refused, from where, whose (a principal, or the id of a key
    that named none), and why."""
    whose = f"principal {who}" if isinstance(who, Principal) else f"key {who}" if who else None
    logger.warning(
        "refused %s %r from %s (%s): %d %s",
        scope.get("method"),
        scope.get("path", "")[:200],
        (scope.get("client") or ("?",))[0],
        whose or "no principal",
        status,
        detail,
    )


async def _refuse(
    scope: Scope,
    send: Send,
    status: int,
    detail: str,
    extra: dict[str, str] | None = None,
    who: Principal | str | None = None,
) -> None:
    _log_refusal(scope, status, detail, who)
    await _reply(send, status, detail, extra)


async def _reply(send: Send, status: int, detail: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
