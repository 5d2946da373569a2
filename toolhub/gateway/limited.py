"""The gateway's answer when a tenant is over one of its quotas: HTTP 429 with
``Retry-After`` and a typed ``rate_limited`` error naming the quota, its limit and when to try
again, never a bare status a client must guess at (docs/interfaces.md)."""

from __future__ import annotations

import math

from fastapi.responses import JSONResponse

from toolhub.core import ErrorKind, ToolError

__all__ = ["rate_limited"]


def rate_limited(detail: str, retry_after: float, *, quota: str, limit: int) -> JSONResponse:
    """429: ``{"detail", "error": {"kind": "rate_limited", "detail", "details": {quota,
    limit, retry_after}}}`` and ``Retry-After`` in whole seconds (at least 1)."""
    seconds = max(1, math.ceil(retry_after))
    error = ToolError(
        ErrorKind.RATE_LIMITED,
        detail,
        {"quota": quota, "limit": limit, "retry_after": seconds},
    )
    return JSONResponse(
        {"detail": detail, "error": error.to_dict()},
        status_code=429,
        headers={"Retry-After": str(seconds)},
    )
