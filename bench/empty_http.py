"""An HTTP server with no work in it, for ``bench_gateway.py``: every request is read and
answered at once with the same JSON bytes (the file ``BENCH_BODY_FILE``: a real answer of the
gateway, so both carry the same bytes). What an HTTP client spends on a request against it is
the client's own cost, which a call through the gateway pays on top of the gateway's.

    BENCH_BODY_FILE=answer.json uvicorn bench.empty_http:app --lifespan off
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BODY = Path(os.environ["BENCH_BODY_FILE"]).read_bytes()
HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BODY)).encode()),
]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
