"""A call's result as its HTTP answer (the route's and ``shortcut.py``'s alike): 200, or 429
with ``Retry-After`` when the dispatcher refused the call over a quota of its tenant
(``toolhub.distributed.quota``). The body is the typed result either way, so a client reads
the same ``rate_limited`` error, its quota and ``retry_after``, that the model reads as text.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.responses import JSONResponse

from toolhub.errors import ErrorCode


def call_answer(result: dict[str, Any]) -> JSONResponse:
    details = (result.get("error") or {}).get("details") or {}
    if details.get("code") != ErrorCode.QUOTA_EXCEEDED:
        return JSONResponse(result)
    retry = max(1, math.ceil(float(details.get("retry_after") or 1)))
    return JSONResponse(result, status_code=429, headers={"Retry-After": str(retry)})
