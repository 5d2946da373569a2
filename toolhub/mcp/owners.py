"""An MCP session over streamable HTTP belongs to the principal that opened it.

Threat: a client that learns another's ``Mcp-Session-Id`` (a log, a proxy, a shared token)
and presents it to cancel, answer or read that client's requests. The ``Guard`` in front has
already found the caller's principal; ``SessionOwner`` hands it to the MCP SDK as the request's
authenticated user (``scope["user"]``), and the SDK's session manager then binds each session
to the user that opened it: a request of any other principal naming that session is answered
``404 Session not found``, exactly as a session that does not exist, and a session ended by
the client or its idle timeout is forgotten with its owner. Each such refusal is logged here at
WARNING with the principal (and only the first characters of the session id).

Tasks of the 2026 protocol, which has no MCP session, are bound to the same principal
(``tasks.principal_of``).
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from toolhub.http_guard import principal_in

logger = logging.getLogger("toolhub.mcp.owners")

_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")


class SessionOwner:
    """ASGI middleware behind the ``Guard``: the principal as the SDK's authenticated user."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        principal = principal_in(scope) if scope["type"] == "http" else None
        if principal is None:
            await self.app(scope, receive, send)
            return
        # The token field is the SDK's; the credential is never put anywhere past the Guard.
        user = AccessToken(token="", client_id=str(principal), scopes=[])
        scope["user"] = AuthenticatedUser(user)
        named = next((v for k, v in scope["headers"] if k == _SESSION_HEADER), None)
        if named is None:
            await self.app(scope, receive, send)
            return

        async def watching(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 404:
                logger.warning(
                    "principal %s: MCP session %s… refused: not found, or another principal's",
                    principal,
                    named[:8].decode("latin-1"),
                )
            await send(message)

        await self.app(scope, receive, watching)
