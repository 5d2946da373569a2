"""The gateway's most frequent request answered without FastAPI's router: ``POST
/v1/sessions/{session_id}/calls``, a JSON body, a JSON result.

Why: traced call by call (bench/bench_gateway.py's stack, marks at each layer), FastAPI's own
path took most of what the gateway adds to a call, between uvicorn reading the request and the
route's first line: the exception and exit-stack middleware, the router trying each route's
pattern, reading and parsing the body, and solving the route's dependencies (the body model, the
query, the request). This middleware sits inside ``Guard`` (the host, token and size checks are
made) and ``RequestMetrics`` (the request is counted under the route's template), reads the
body, validates it with the route's own model and starts the call as the route would.

It scopes the session as the route does: the id in the path is the client's, looked up under
the tenant of the principal the ``Guard`` left in the scope, so another tenant's session is not
held under that name and the request goes on to the route, which answers 404.

It answers only the plain case. Anything else goes on to FastAPI with the body handed over
again, so every error keeps FastAPI's shape and the OpenAPI document keeps describing the
route: a query string (``cancel_on_disconnect``), ``Accept: text/event-stream``, a body
without ``Content-Length`` or not declared JSON, a body the model refuses, a session this
gateway does not hold or must check again in the shared store, a call id still in use.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import ValidationError
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolhub.http_guard import principal_in
from toolhub.tracing import carrier_of_asgi

from .call_answer import call_answer
from .calllog import CallLog
from .calls import CallConflict
from .models import CallRequest
from .sessions import stored_id

if TYPE_CHECKING:
    from .app import Gateway

CALLS_PATH = "/v1/sessions/{session_id}/calls"
_CALLS = re.compile(r"/v1/sessions/([^/]+)/calls")


class CallShortcut:
    """ASGI middleware: a plain JSON call started and answered here; any other request, and
    any call it declines, passed on unchanged."""

    def __init__(self, app: ASGIApp, *, gateway: Gateway, route: BaseRoute) -> None:
        self.app = app
        self.gateway = gateway
        #: The FastAPI route this stands in for: left in the scope as the router would, so
        #: ``RequestMetrics`` labels the request with its template.
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _plain_call(scope)
        if match is None:
            await self.app(scope, receive, send)
            return
        replay = _Replay(receive)
        body = await replay.read_body()
        log = None if body is None else self._start(scope, match, body)
        if log is None:
            await self.app(scope, replay, send)
            return
        scope["route"] = self.route
        await call_answer(await log.result())(scope, receive, send)

    def _start(self, scope: Scope, client_id: str, body: bytes) -> CallLog | None:
        """The call's log once started, or None to leave the request to FastAPI."""
        caller = principal_in(scope)
        sid = stored_id(caller, client_id) if caller is not None else None
        session = self.gateway.sessions.held(sid) if sid is not None else None
        if session is None:
            return None
        try:
            call = CallRequest.model_validate_json(body)
            trace = carrier_of_asgi(scope["headers"])
            return self.gateway.calls.start(session, call.name, call.arguments, call.call_id, trace)
        except (ValidationError, CallConflict):
            return None


def _plain_call(scope: Scope) -> str | None:
    """The session id of a request this may answer, judged on its head alone."""
    if (
        scope["type"] != "http"
        or scope["method"] != "POST"
        or scope.get("query_string")
        or scope.get("root_path")
    ):
        return None
    match = _CALLS.fullmatch(scope["path"])
    if match is None:
        return None
    length = media = None
    for name, value in scope["headers"]:
        name = name.lower()
        if name == b"content-length":
            length = value
        elif name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
        elif name == b"accept" and b"text/event-stream" in value:
            return None
    if length is None or media != b"application/json":
        return None
    return match.group(1)


class _Replay:
    """``receive`` that hands on, in order, the messages already read from the client."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._read: list[Message] = []

    async def read_body(self) -> bytes | None:
        """The whole body, or None when the client left before sending it."""
        parts = []
        while True:
            message = await self._receive()
            self._read.append(message)
            if message["type"] != "http.request":
                return None
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(parts)

    async def __call__(self) -> Message:
        if self._read:
            return self._read.pop(0)
        return await self._receive()
