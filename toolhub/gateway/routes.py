"""The HTTP API of docs/contract.md: sessions, tool definitions, calls (JSON or SSE), call
records and events, cancellation, answers to ``ask_user``, external tools, who the caller is,
probes and metrics.

Every session route names the session by the client's id and reaches it only through the
caller's tenant (``_session``): another tenant's session answers 404, exactly as one that does
not exist, whether its id was guessed or read. A call id in a route is the client's, looked up
as the session's stored call id (``call_ids.py``). Responses name sessions and calls by the
client's ids.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from toolhub.core import ConfigError, ToolError
from toolhub.http_guard import principal_in
from toolhub.session import Session
from toolhub.sources.merge import ExternalSources, SourceTool
from toolhub.tenancy import effective
from toolhub.tenancy.principal import Principal, client_session_id
from toolhub.toolset import STRICT_FORMATS, ExternalSpec
from toolhub.tracing import carrier_of

from . import sse
from .call_answer import call_answer
from .call_ids import shown, stored_call_id
from .calls import CallConflict
from .forward import forward_handler, forward_source, vet_target
from .limited import rate_limited
from .metrics import CONTENT_TYPE
from .models import (
    TOOL_NAME,
    Answers,
    CallRequest,
    CallResultBody,
    Cancelled,
    CreateSession,
    Delivered,
    ExternalToolBody,
    ExternalToolRegistered,
    Format,
    Health,
    Problem,
    SessionCreated,
    WhoAmI,
)
from .session_use import TenantAtCap
from .sessions import TooManySessions, WorkspaceError, stored_id

if TYPE_CHECKING:
    from .app import Gateway

HTTP_SOURCE = "http"
logger = logging.getLogger("toolhub.gateway.routes")

router = APIRouter(
    responses={
        400: {
            "model": Problem,
            "description": "Malformed request (e.g. a body that is not UTF-8, or two "
            "Authorization or Host headers).",
        },
        401: {
            "model": Problem,
            "description": "An API key or TOOLHUB_API_TOKEN is required; unknown or revoked.",
        },
        413: {"model": Problem, "description": "Request body over the size limit."},
    }
)

Responses = dict[int | str, dict[str, Any]]
_404: Responses = {404: {"model": Problem, "description": "Unknown session or call."}}
_SSE: dict[str, Any] = {"content": {"text/event-stream": {"schema": {"type": "string"}}}}


def gateway(request: Request) -> Gateway:
    return request.app.state.gateway  # type: ignore[no-any-return]


def principal(request: Request) -> Principal:
    """The caller, as the ``Guard`` found it."""
    found = principal_in(request.scope)
    if found is None:
        raise HTTPException(401, "no principal: the request did not pass the gateway's guard")
    return found


async def _session(request: Request, session_id: str) -> Session:
    """The caller's session ``session_id`` (the client's id), looked up in its tenant only."""
    caller = principal(request)
    sid = stored_id(caller, session_id)
    session = await gateway(request).sessions.lookup(sid) if sid is not None else None
    if session is None:
        logger.warning("principal %s: no session %r of its tenant", caller, session_id[:200])
        raise HTTPException(404, f"unknown session {session_id!r}")
    return session


# -- sessions and definitions ----------------------------------------------------------------------


@router.post(
    "/v1/sessions",
    status_code=201,
    response_model=SessionCreated,
    responses={
        200: {"model": SessionCreated, "description": "The session already existed."},
        400: {"model": Problem, "description": "Workspace outside the root."},
        422: {"model": Problem, "description": "Invalid body or tool-set config."},
        429: {
            "model": Problem,
            "description": "Too many sessions: the gateway's, or the tenant's share "
            "(`rate_limited`, with `Retry-After`).",
        },
    },
)
async def create_session(body: CreateSession, request: Request) -> Any:
    gw = gateway(request)
    caller = principal(request)
    try:
        session, created = await gw.sessions.create(
            caller, body.config, body.workspace, body.session_id
        )
    except WorkspaceError as err:
        logger.warning("principal %s: session refused: %s", caller, err)
        raise HTTPException(400, str(err)) from None
    except TooManySessions as err:
        logger.warning("principal %s: session refused: %s", caller, err)
        raise HTTPException(429, str(err)) from None
    except TenantAtCap as err:
        logger.warning("principal %s: session refused: %s", caller, err)
        return rate_limited(str(err), err.retry_after, quota="sessions", limit=err.limit)
    except ConfigError as err:
        logger.warning(
            "principal %s: session config refused: %d violation(s)", caller, len(err.violations)
        )
        raise HTTPException(422, [v.to_dict() for v in err.violations]) from None
    body_out = SessionCreated(
        session_id=client_session_id(session.session_id),
        created=created,
        tools=len(session.toolset.entries),
        warnings=list(session.warnings),
    )
    return JSONResponse(body_out.model_dump(), status_code=201 if created else 200)


@router.delete("/v1/sessions/{session_id}", status_code=204, responses=_404)
async def delete_session(session_id: str, request: Request) -> Response:
    caller = principal(request)
    sid = stored_id(caller, session_id)
    if sid is None or not await gateway(request).sessions.close(sid):
        logger.warning("principal %s: no session %r of its tenant", caller, session_id[:200])
        raise HTTPException(404, f"unknown session {session_id!r}")
    return Response(status_code=204)


@router.get(
    "/v1/sessions/{session_id}/tools",
    response_model=list[dict[str, Any]],
    responses={
        422: {
            "model": Problem,
            "description": "Invalid query, or strict with a format without it.",
        },
        **_404,
    },
)
async def tool_definitions(
    session_id: str,
    request: Request,
    format: Format = "openai",
    strict: Annotated[
        bool, Query(description="OpenAI strict form (formats openai and mcp).")
    ] = False,
) -> list[dict[str, Any]]:
    session = await _session(request, session_id)
    if strict and format not in STRICT_FORMATS:
        raise HTTPException(422, f"no strict form for {format!r}: use {', '.join(STRICT_FORMATS)}")
    return session.definitions(format, strict=strict)


# -- calls -----------------------------------------------------------------------------------------


@router.post(
    "/v1/sessions/{session_id}/calls",
    response_model=CallResultBody,
    responses={
        200: {**_SSE, "description": "The result, or with Accept: text/event-stream the events."},
        409: {"model": Problem, "description": "A call with this call_id is still running."},
        429: {
            "model": CallResultBody,
            "description": "Over a quota of the caller's tenant: the result, a `rate_limited` "
            "error whose details name the quota and `retry_after`; the `Retry-After` header "
            "says the same in whole seconds. Nothing ran or was queued.",
        },
        499: {"model": Problem, "description": "Client went away (cancel_on_disconnect)."},
        **_404,
    },
)
async def call_tool(
    session_id: str,
    body: CallRequest,
    request: Request,
    cancel_on_disconnect: Annotated[
        bool, Query(description="Cancel the call when this client disconnects.")
    ] = False,
) -> Any:
    gw = gateway(request)
    session = await _session(request, session_id)
    try:
        log = gw.calls.start(
            session, body.name, body.arguments, body.call_id, carrier_of(request.headers)
        )
    except CallConflict as err:
        logger.warning("principal %s: call refused: %s", principal(request), err)
        raise HTTPException(409, str(err)) from None

    async def cancel() -> object:
        return await session.cancel(log.call_id)

    if "text/event-stream" in request.headers.get("accept", ""):
        return sse.EventStream(
            log,
            keepalive_s=gw.settings.keepalive_s,
            on_abandon=cancel if cancel_on_disconnect else None,
        )
    result = log.result()
    if not cancel_on_disconnect:
        return call_answer(await result)
    waiter = asyncio.ensure_future(result)
    watcher = asyncio.ensure_future(_disconnected(request))
    done, _ = await asyncio.wait({waiter, watcher}, return_when=asyncio.FIRST_COMPLETED)
    watcher.cancel()
    if waiter in done:
        return call_answer(waiter.result())
    waiter.cancel()
    await cancel()
    return JSONResponse({"detail": "client disconnected; call cancelled"}, status_code=499)


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.get("/v1/sessions/{session_id}/calls/{call_id}", responses=_404)
async def call_record(session_id: str, call_id: str, request: Request) -> dict[str, Any]:
    session = await _session(request, session_id)
    cid = stored_call_id(session.session_id, call_id)
    record = await gateway(request).calls.record(cid, session)
    if record is None:
        raise HTTPException(404, f"session {session_id!r} has no call {call_id!r}")
    return {**shown(record, cid, call_id), "session_id": session_id}


@router.get(
    "/v1/sessions/{session_id}/calls/{call_id}/events",
    response_class=Response,
    responses={
        200: {**_SSE, "description": "progress events, then one result event"},
        400: {"model": Problem, "description": "Malformed Last-Event-ID."},
        **_404,
    },
)
async def call_events(
    session_id: str,
    call_id: str,
    request: Request,
    last_event_id: Annotated[str | None, Header(description="Resume after this event.")] = None,
) -> Response:
    gw = gateway(request)
    try:
        after = sse.parse_last_event_id(last_event_id)
    except ValueError:
        raise HTTPException(400, "Last-Event-ID must be a non-negative integer") from None
    session = await _session(request, session_id)
    log = await gw.calls.follow(stored_call_id(session.session_id, call_id), session.session_id)
    if log is None:
        raise HTTPException(404, f"session {session_id!r} has no call {call_id!r}")
    return sse.EventStream(log, after, keepalive_s=gw.settings.keepalive_s)


@router.delete(
    "/v1/sessions/{session_id}/calls/{call_id}",
    status_code=202,
    response_model=Cancelled,
    responses=_404,
)
async def cancel_call(session_id: str, call_id: str, request: Request) -> Any:
    session = await _session(request, session_id)
    cid = stored_call_id(session.session_id, call_id)
    outcome = await gateway(request).calls.cancel(cid, session.session_id)
    if outcome is None:
        raise HTTPException(404, f"session {session_id!r} has no call {call_id!r}")
    return JSONResponse(Cancelled(call_id=call_id, cancelled=outcome).model_dump(), status_code=202)


@router.api_route(
    "/v1/calls/{call_id:path}",
    methods=["GET", "DELETE"],
    status_code=410,
    include_in_schema=False,
)
async def unscoped_call(call_id: str) -> Response:
    """The unscoped routes of earlier releases: a call id alone reached any session's call,
    so they answer 410 with where the call routes are now."""
    return JSONResponse(
        {
            "detail": "call routes name their session: "
            "/v1/sessions/{session_id}/calls/{call_id}[/events]"
        },
        status_code=410,
    )


@router.post(
    "/v1/sessions/{session_id}/answers/{call_id}",
    response_model=Delivered,
    responses={409: {"model": Problem, "description": "No open question."}, **_404},
)
async def answer(session_id: str, call_id: str, body: Answers, request: Request) -> Delivered:
    session = await _session(request, session_id)
    cid = stored_call_id(session.session_id, call_id)
    if not await gateway(request).calls.owns(cid, session):
        raise HTTPException(404, f"session {session_id!r} has no call {call_id!r}")
    if not await asyncio.to_thread(session.answer, cid, body.answers):
        raise HTTPException(409, f"call {call_id!r} has no open question")
    return Delivered(call_id=call_id, delivered=True)


# -- external tools ------------------------------------------------------------------------------


@router.put(
    "/v1/sessions/{session_id}/external-tools/{name}",
    response_model=ExternalToolRegistered,
    responses={
        409: {"model": Problem, "description": "Name taken, or mode is not `all`."},
        422: {"model": Problem, "description": "Invalid name or body."},
        **_404,
    },
)
async def put_external_tool(
    session_id: str,
    name: Annotated[str, PathParam(pattern=TOOL_NAME, description="`server__tool`")],
    body: ExternalToolBody,
    request: Request,
) -> ExternalToolRegistered:
    session = await _session(request, session_id)
    spec = ExternalSpec(
        name,
        body.description,
        body.input_schema,
        forward_source(
            body.forward.url,
            body.forward.headers,
            body.forward.timeout_s,
            private_ok=gateway(request).settings.forward_private,
        ),
    )
    try:
        await vet_target(body.forward.url, private_ok=gateway(request).settings.forward_private)
    except ToolError as err:
        raise HTTPException(422, f"forward URL refused: {err.detail}") from None
    sources = ExternalSources.of(session.toolset)
    try:
        visible = sources.put(HTTP_SOURCE, SourceTool(spec, forward_handler(spec)))
    except ToolError as err:
        sources.remove(HTTP_SOURCE, name)
        raise HTTPException(422, err.detail) from None
    if not visible:
        sources.remove(HTTP_SOURCE, name)
        raise HTTPException(
            409, f"`{name}` is taken by another tool, or the session's mode is not `all`"
        )
    return ExternalToolRegistered(name=name, session_id=session_id)


@router.delete("/v1/sessions/{session_id}/external-tools/{name}", status_code=204, responses=_404)
async def delete_external_tool(session_id: str, name: str, request: Request) -> Response:
    session = await _session(request, session_id)
    if not ExternalSources.of(session.toolset).remove(HTTP_SOURCE, name):
        raise HTTPException(404, f"no external tool {name!r} registered over HTTP")
    return Response(status_code=204)


# -- the caller ------------------------------------------------------------------------------------


@router.get("/v1/policy", response_model=dict[str, Any])
async def policy(request: Request) -> dict[str, Any]:
    """What the caller's tenant may ask for in a session config: the operator's policy and,
    for every tool it may enable, the largest value of each limit (``toolhub policy show``)."""
    caller = principal(request)
    return await asyncio.to_thread(effective, gateway(request).sessions.policy, caller.tenant)


@router.get("/v1/whoami", response_model=WhoAmI)
async def whoami(request: Request) -> WhoAmI:
    """The tenant and key id the request's credentials name."""
    caller = principal(request)
    return WhoAmI(tenant=caller.tenant, key_id=caller.key_id)


# -- probes and metrics ---------------------------------------------------------------------------


@router.get("/healthz", response_model=Health)
async def healthz(request: Request) -> Health:
    return Health(status="ok", deployment=gateway(request).deployment)


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(request: Request) -> Any:
    gw = gateway(request)
    ready, checks = await gw.readiness()
    body = Health(status="ready" if ready else "unready", deployment=gw.deployment, checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {}}}})
async def metrics(request: Request) -> Response:
    payload = await asyncio.to_thread(gateway(request).metrics.render)
    return Response(payload, media_type=CONTENT_TYPE)
