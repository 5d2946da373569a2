"""The approvals API: the calls of a session awaiting a person's approval, and the approval
or denial of one (docs/approvals.md).

``GET /v1/sessions/{id}/approvals`` lists them; ``POST /v1/sessions/{id}/calls/{call_id}/
approval`` decides one, with optional edited arguments. Any replica answers: a fleet
session's approvals live in Redis, and the approving replica queues the call itself, so the
call runs whether or not the replica that took it still lives. The principal that decided
is kept in the call's record. Threat: the body is a client's (bounded, validated), and a
session is reached only through the caller's tenant, as every session route.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from toolhub.approvals.base import ApprovalRefused

from .call_ids import client_call_id, stored_call_id
from .models import Problem
from .routes import COMMON_RESPONSES, _404, _session, principal

router = APIRouter(responses=COMMON_RESPONSES)


class ApprovalBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    arguments: dict[str, Any] | None = Field(
        None, description="Edited arguments (canonical names), validated and checked again."
    )
    reason: str | None = Field(None, max_length=2000, description="Why (a denial's).")


class Pending(BaseModel):
    approvals: list[dict[str, Any]]


@router.get("/v1/sessions/{session_id}/approvals", response_model=Pending, responses=_404)
async def pending(session_id: str, request: Request) -> Pending:
    session = await _session(request, session_id)
    found = await asyncio.to_thread(session.pending)
    for item in found:
        item["call_id"] = client_call_id(session.session_id, str(item["call_id"]))
    return Pending(approvals=found)


@router.post(
    "/v1/sessions/{session_id}/calls/{call_id}/approval",
    responses={
        403: {"model": Problem, "description": "Edited arguments a permission rule denies."},
        409: {"model": Problem, "description": "The call no longer awaits approval."},
        410: {"model": Problem, "description": "Its approval expired."},
        422: {"model": Problem, "description": "Edited arguments that fail validation."},
        **_404,
    },
)
async def decide(
    session_id: str, call_id: str, body: ApprovalBody, request: Request
) -> JSONResponse:
    session = await _session(request, session_id)
    cid = stored_call_id(session.session_id, call_id)
    who = str(principal(request))
    try:
        if body.decision == "approve":
            record = await asyncio.to_thread(
                session.approve, cid, arguments=body.arguments, principal=who
            )
        else:
            record = await asyncio.to_thread(session.deny, cid, body.reason, principal=who)
    except ApprovalRefused as refused:
        return JSONResponse({"detail": refused.to_dict()}, status_code=refused.http_status)
    return JSONResponse(
        {
            "call_id": call_id,
            "decision": body.decision,
            "status": record.get("status"),
            "approval": record.get("approval"),
        }
    )
