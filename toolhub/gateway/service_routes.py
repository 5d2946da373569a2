"""The gateway's routes of no session: what the caller's tenant may ask for (its policy), who
the caller is, the liveness and readiness probes and the Prometheus metrics.

They sit behind the same ``Guard`` as the session routes (a caller must be known to read its
policy or its identity); the probes and metrics answer whatever the deployment's guard lets
through.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from toolhub.tenancy import effective

from .metrics import CONTENT_TYPE
from .models import Health, WhoAmI
from .routes import COMMON_RESPONSES, gateway, principal

router = APIRouter(responses=COMMON_RESPONSES)


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
