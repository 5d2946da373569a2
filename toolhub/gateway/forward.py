"""External tools registered over HTTP: each call is forwarded to the registrant's URL.

The protocol (docs/interfaces.md): toolhub POSTs ``{"name", "arguments", "call_id",
"session_id"}`` as JSON; a 2xx answer's JSON body is the tool's output (a JSON string becomes
plain text for the model); any other status fails the call with the answer's text as the
detail the model reads. The spec's ``source`` carries the target, so any process that rebuilds
the tool set (a worker) can rebuild the handler with ``forward_handler``.

A registration names a URL the gateway will POST to, so without a guard any client could make
the gateway reach what only it can reach: the cloud metadata service, the cluster's internal
services. Targets pass the same ``NetGuard`` as ``web_fetch``, at registration and again at
every call (resolved, vetted, then dialled at the vetted address, so DNS rebinding between the
two does not help): the cloud metadata addresses are always refused, loopback and private
addresses only when the gateway allows them (``private_ok``: a gateway on loopback does, its
clients run on the same machine; beyond loopback only with ``TOOLHUB_FORWARD_PRIVATE=1``).
Redirects are not followed.
"""

from __future__ import annotations

from typing import Any

import httpx

from toolhub.backends.providers.netguard import NetGuard, SystemResolver, Target, TransportFactory
from toolhub.core import ToolContext, ToolError
from toolhub.tenancy import client_session_id
from toolhub.toolset import ExternalHandler, ExternalSpec

from .call_ids import client_call_id

MAX_ERROR_TEXT = 2000


def forward_source(
    url: str, headers: dict[str, str], timeout_s: float, *, private_ok: bool
) -> dict[str, Any]:
    return {
        "forward": {
            "url": url,
            "headers": headers,
            "timeout_s": timeout_s,
            "private_ok": private_ok,
        }
    }


def forward_guard(private_ok: bool) -> NetGuard:
    return NetGuard(SystemResolver(), allow_local=private_ok)


async def vet_target(url: str, *, private_ok: bool) -> Target:
    """The vetted target of ``url``; ``permission_denied`` / ``invalid_arguments`` otherwise."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ToolError.invalid_arguments(f"not a valid URL: {exc}") from None
    return await forward_guard(private_ok).vet(parsed)


def forward_handler(spec: ExternalSpec) -> ExternalHandler:
    """The handler of a tool whose ``spec.source`` is a ``forward_source``."""
    target = spec.source["forward"]
    url: str = target["url"]
    headers: dict[str, str] = dict(target.get("headers") or {})
    timeout_s = float(target.get("timeout_s") or 60.0)
    private_ok = bool(target.get("private_ok", False))

    async def handle(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        payload = {
            "name": spec.name,
            "arguments": arguments,
            "call_id": client_call_id(ctx.session_id, ctx.call_id),
            "session_id": client_session_id(ctx.session_id),
        }
        vetted = await vet_target(url, private_ok=private_ok)
        try:
            async with httpx.AsyncClient(
                timeout=timeout_s, transport=TransportFactory()()
            ) as client:
                response = await client.post(
                    vetted.request_url(),
                    json=payload,
                    headers={**headers, **vetted.headers()},
                    extensions=vetted.extensions(),
                )
        except httpx.TimeoutException:
            detail = f"`{spec.name}`: no answer from its endpoint within {timeout_s:g}s"
            raise ToolError.timeout(detail) from None
        except httpx.HTTPError as exc:
            detail = f"`{spec.name}`: its endpoint is unreachable ({exc})"
            raise ToolError.execution(detail) from None
        if response.status_code >= 300:
            text = response.text[:MAX_ERROR_TEXT] or response.reason_phrase
            raise ToolError.execution(f"`{spec.name}` failed ({response.status_code}): {text}")
        try:
            return response.json()
        except ValueError:
            return response.text

    return handle
