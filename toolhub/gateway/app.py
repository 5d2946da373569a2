"""The gateway application: the dispatcher as a service (JSON + SSE over FastAPI).

``create_app`` wires settings, sessions, calls and metrics into one FastAPI app. Distributed
deployments pass what only the shared store knows (``remote`` calls, readiness checks, queue
depths); ``toolhub.gateway.server.build_app`` does that from ``TOOLHUB_REDIS_URL``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import toolhub
from toolhub.errors import ErrorCode, RedisUnavailable
from toolhub.http_guard import PUBLIC_PATHS, Guard
from toolhub.tenancy.keys import KeyFile, Principals
from toolhub.tracing import setup_from_env, shutdown

from . import sse
from .approvals import router as approvals_router
from .calllog import CallLogs
from .calls import Calls
from .metrics import Metrics, QueueDepths
from .mirrors import RemoteCalls
from .routes import router
from .service_routes import router as service_router
from .sessions import Recover, SessionFactory, Sessions
from .settings import GatewaySettings
from .shortcut import CALLS_PATH, CallShortcut

ReadinessCheck = Callable[[], Awaitable[dict[str, str]]]
"""Returns check name → "ok" or the reason it failed."""


class Gateway:
    """Everything a request handler reaches through ``request.app.state.gateway``."""

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        factory: SessionFactory | None = None,
        remote: RemoteCalls | None = None,
        readiness: ReadinessCheck | None = None,
        queue_depths: QueueDepths | None = None,
        recover: Callable[[SessionFactory], Recover] | None = None,
    ) -> None:
        self.settings = settings
        keys = KeyFile(settings.keys_file) if settings.keys_file is not None else None
        #: Who a request's credentials name (the ``Guard`` asks; sessions ask whether the
        #: gateway is multi-tenant).
        self.principals = Principals(settings.api_token, keys)
        self.metrics = Metrics(queue_depths)
        self.sessions = Sessions(
            settings,
            factory,
            recover,
            multi_tenant=lambda: self.principals.multi_tenant,
            busy=lambda sid: self.calls.running_in(sid),
        )
        window = settings.call_window_bytes
        self.calls = Calls(
            self.metrics,
            CallLogs(window=window),
            remote,
            window=window,
            count_usage=not settings.distributed,
        )
        self._readiness = readiness

    @property
    def deployment(self) -> Literal["embedded", "distributed"]:
        return "distributed" if self.settings.distributed else "embedded"

    async def readiness(self) -> tuple[bool, dict[str, str]]:
        if self._readiness is None:
            return True, {}
        try:
            checks = await self._readiness()
        except Exception as exc:
            return False, {"readiness": f"check failed: {exc}"}
        return all(v == "ok" for v in checks.values()), checks

    async def close(self) -> None:
        await self.calls.shutdown()
        await self.sessions.close_all()


class GatewayApp(FastAPI):
    """FastAPI, with the ASGI server's own ``send`` left in each HTTP request's scope
    (``sse.SERVER_SEND``): an event stream writes the frames in the middle of its response
    with it, past the middleware that has nothing to do with them (sse.py says why)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[sse.SERVER_SEND] = send
        await super().__call__(scope, receive, send)


def create_app(
    settings: GatewaySettings,
    *,
    factory: SessionFactory | None = None,
    remote: RemoteCalls | None = None,
    readiness: ReadinessCheck | None = None,
    queue_depths: QueueDepths | None = None,
    recover: Callable[[SessionFactory], Recover] | None = None,
) -> FastAPI:
    gw = Gateway(
        settings,
        factory=factory,
        remote=remote,
        readiness=readiness,
        queue_depths=queue_depths,
        recover=recover,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        setup_from_env("toolhub-gateway")  # OTel traces and metrics when OTEL_* asks for them
        yield
        await gw.close()
        shutdown()

    app = GatewayApp(
        title="toolhub gateway",
        version=toolhub.__version__,
        description="Tool definitions and tool calls over HTTP: JSON results or SSE progress.",
        lifespan=lifespan,
        redoc_url=None,
    )
    app.state.gateway = gw
    app.include_router(router)
    app.include_router(service_router)
    app.include_router(approvals_router)
    required = not gw.principals.open
    app.openapi = _declaring_bearer(app, required=required)  # type: ignore[method-assign]
    app.add_exception_handler(RequestValidationError, _validation_failed)
    app.add_exception_handler(RedisUnavailable, _redis_unavailable)

    # Added first, so innermost of the three: behind the Guard's checks and inside the metrics.
    calls_route = next(
        r
        for r in router.routes
        if isinstance(r, APIRoute) and r.path == CALLS_PATH and "POST" in (r.methods or ())
    )
    app.add_middleware(CallShortcut, gateway=gw, route=calls_route)
    app.add_middleware(
        Guard,
        principals=gw.principals,
        max_body_bytes=settings.max_body_bytes,
        allowed_hosts=settings.allowed_hosts,
    )
    app.add_middleware(RequestMetrics, metrics=gw.metrics)
    return app


def _declaring_bearer(app: FastAPI, *, required: bool) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` that says what ``Guard`` enforces, so generated clients send the token:
    HTTP bearer on every route outside ``PUBLIC_PATHS`` — required when the gateway has a
    token, optional (``{}`` beside it) when it has none and answers anyone."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()  # FastAPI builds once and keeps it in ``app.openapi_schema``
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        if "bearer" not in schemes:
            schemes["bearer"] = {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key (toolhub keys create) or TOOLHUB_API_TOKEN, "
                "as `Authorization: Bearer <key>`.",
            }
            bearer: dict[str, list[str]] = {"bearer": []}
            security = [bearer] if required else [bearer, {}]
            for path, operations in schema.get("paths", {}).items():
                if path not in PUBLIC_PATHS:
                    for operation in operations.values():
                        operation["security"] = security
        return schema

    return openapi


#: How much of a refused value a 422 repeats back: enough to recognise it, never a whole
#: megabyte body.
ECHO_CHARS = 200


async def _validation_failed(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, with each refused ``input`` cut to ``ECHO_CHARS``; a body refused because
    it was not sent as JSON says so instead (``_not_sent_as_json``)."""
    assert isinstance(exc, RequestValidationError)
    errors = [{**e, "input": _short(e.get("input"))} if "input" in e else e for e in exc.errors()]
    media = request.headers.get("content-type")
    if not _is_json_media(media) and any(tuple(e.get("loc", ()))[:1] == ("body",) for e in errors):
        errors = [_not_sent_as_json(media)]
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def _is_json_media(media: str | None) -> bool:
    """What FastAPI parses as JSON: ``application/json`` or ``application/*+json``."""
    kind = (media or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _not_sent_as_json(media: str | None) -> dict[str, Any]:
    """The one error for a body sent without a JSON ``Content-Type``. curl's ``-d`` sends
    ``application/x-www-form-urlencoded``; FastAPI then validates the raw text and answers
    "Input should be a valid dictionary", about a body that is a JSON object. The body is not
    read as JSON anyway: a browser page may post a form or ``text/plain`` to a loopback
    gateway without asking first (no CORS preflight), so only ``application/json`` runs
    anything."""
    sent = f"`{_short(media)}`" if media else "no Content-Type"
    return {
        "type": "content_type",
        "loc": ["header", "content-type"],
        "msg": "The body must be JSON sent with `Content-Type: application/json` "
        f"(curl: `--json BODY`, or `-H 'Content-Type: application/json'` with `-d`); got {sent}",
        "input": media,
    }


async def _redis_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """A distributed gateway whose Redis is down answers what ``/readyz`` says: 503, typed."""
    return JSONResponse(
        {"detail": str(exc), "code": ErrorCode.REDIS_UNAVAILABLE.value}, status_code=503
    )


def _short(value: Any) -> Any:
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    except (RecursionError, ValueError):
        return f"<{type(value).__name__} nested too deeply to show>"
    if len(text) <= ECHO_CHARS:
        return value
    return text[:ECHO_CHARS] + f"… ({len(text)} chars)"


class RequestMetrics:
    """Request latency by route template (not raw path: ids would explode the label set)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", "(unmatched)")
            self.metrics.requests.labels(scope["method"], route, str(status)).observe(
                time.perf_counter() - started
            )
