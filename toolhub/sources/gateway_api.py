"""The one client of the gateway API (docs/interfaces.md, §1), in two forms.

``GatewayClient`` (synchronous) is the Python client for scripts and agent loops (the demo
uses it; its public path is ``toolhub.gateway.client``), and opens a hub's remote session.
``AsyncGatewayClient`` is what a hub's tool needs on the caller's loop (``hub.py``): one call's
event stream, its cancel and its answers. Other languages speak the same HTTP + SSE. The event
stream is decoded by ``httpx-sse``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError, aconnect_sse, connect_sse

from toolhub.core import ToolError
from toolhub.errors import ErrorCode, ToolhubError


@dataclass(frozen=True)
class SseEvent:
    id: int
    event: str
    data: dict[str, Any]


class GatewayError(ToolhubError, RuntimeError):
    """The gateway answered an error status; ``status`` and ``detail`` are its answer."""

    code = ErrorCode.GATEWAY_ERROR

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"gateway answered {status}: {detail}")
        self.status = status
        self.detail = detail


class RateLimited(GatewayError):
    """The gateway answered 429: over a quota of this client's tenant (``error``: the typed
    ``rate_limited`` error of a refused call, naming the quota; None for the gateway's own
    limits, such as its session table). ``retry_after``: seconds to wait, from the
    ``Retry-After`` header (None when it sent none). Nothing ran."""

    def __init__(self, detail: Any, retry_after: float | None, error: ToolError | None) -> None:
        super().__init__(429, detail)
        self.retry_after = retry_after
        self.error = error

    @property
    def quota(self) -> str | None:
        """Which quota refused the call (``calls_per_second``, ``concurrent_calls`` ...)."""
        details = self.error.details if self.error is not None else None
        return str(details["quota"]) if details and "quota" in details else None


#: What a request to a gateway raises when the gateway is unreachable or answers otherwise
#: than the API says (an error status, or a body that is not the expected JSON).
GATEWAY_FAILURES = (httpx.HTTPError, GatewayError, ValueError, KeyError)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _json(response: httpx.Response) -> Any:
    """The answer's JSON body, or ``GatewayError`` for an error status."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text}
        body = body if isinstance(body, dict) else {"detail": body}
        if response.status_code == 429:
            raise _rate_limited(response, body)
        raise GatewayError(response.status_code, body.get("detail"))
    return response.json() if response.content else None


def _rate_limited(response: httpx.Response, body: dict[str, Any]) -> RateLimited:
    header = response.headers.get("Retry-After")
    try:
        retry_after: float | None = float(header) if header is not None else None
    except ValueError:
        retry_after = None
    error = None
    if isinstance(body.get("error"), dict):
        error = ToolError.from_dict(body["error"])
        details = error.details or {}
        if isinstance(details.get("retry_after"), int | float):
            retry_after = float(details["retry_after"])
        return RateLimited(error.detail, retry_after, error)
    return RateLimited(body.get("detail"), retry_after, error)


class GatewayClient:
    """``timeout`` bounds connecting and sending; reading waits for ``read_timeout`` (None: as
    long as a call runs, as ``call`` and the event streams need)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 60.0,
        *,
        read_timeout: float | None = None,
    ) -> None:
        self.http = httpx.Client(
            base_url=url,
            headers=_headers(token),
            timeout=httpx.Timeout(timeout, read=read_timeout),
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def whoami(self) -> dict[str, str]:
        """``{tenant, key_id}``: who this client's token or key names."""
        return _json(self.http.get("/v1/whoami"))  # type: ignore[no-any-return]

    def create_session(
        self,
        config: dict[str, Any] | None = None,
        workspace: str | None = None,
        *,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        body = {"config": config, "workspace": workspace, "session_id": session_id}
        return _json(self.http.post("/v1/sessions", json=body))  # type: ignore[no-any-return]

    def tools(
        self, session_id: str, format: str = "openai", *, strict: bool = False
    ) -> list[dict[str, Any]]:
        params = {"format": format, **({"strict": "true"} if strict else {})}
        response = self.http.get(f"/v1/sessions/{session_id}/tools", params=params)
        return _json(response)  # type: ignore[no-any-return]

    def call(
        self, session_id: str, name: str, arguments: Any = None, call_id: str | None = None
    ) -> dict[str, Any]:
        body = {"name": name, "arguments": arguments, "call_id": call_id}
        return _json(self.http.post(f"/v1/sessions/{session_id}/calls", json=body))  # type: ignore[no-any-return]

    def stream(
        self, session_id: str, name: str, arguments: Any = None, call_id: str | None = None
    ) -> Iterator[SseEvent]:
        """The call's events as they happen: progress events, then the result event."""
        body = {"name": name, "arguments": arguments, "call_id": call_id}
        with connect_sse(
            self.http, "POST", f"/v1/sessions/{session_id}/calls", json=body
        ) as source:
            yield from self._events(source)

    def events(self, session_id: str, call_id: str, after: int = 0) -> Iterator[SseEvent]:
        """The session's call's events after sequence number ``after`` (sent as
        ``Last-Event-ID``): the replay of what was missed, then the live ones."""
        headers = {"Last-Event-ID": str(after)} if after else {}
        path = f"/v1/sessions/{session_id}/calls/{call_id}/events"
        with connect_sse(self.http, "GET", path, headers=headers) as source:
            yield from self._events(source)

    def _events(self, source: EventSource) -> Iterator[SseEvent]:
        if source.response.status_code >= 400:
            source.response.read()
            _json(source.response)
        yield from sse_events(source)

    def record(self, session_id: str, call_id: str) -> dict[str, Any]:
        path = f"/v1/sessions/{session_id}/calls/{call_id}"
        return _json(self.http.get(path))  # type: ignore[no-any-return]

    def cancel(self, session_id: str, call_id: str) -> bool:
        path = f"/v1/sessions/{session_id}/calls/{call_id}"
        return bool(_json(self.http.delete(path))["cancelled"])

    def answer(self, session_id: str, call_id: str, answers: Any) -> bool:
        response = self.http.post(
            f"/v1/sessions/{session_id}/answers/{call_id}", json={"answers": answers}
        )
        return bool(_json(response)["delivered"])


class AsyncGatewayClient:
    """The calls of one tool call on a gateway, on the caller's event loop."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0) -> None:
        self.http = httpx.AsyncClient(
            base_url=url, headers=_headers(token), timeout=httpx.Timeout(timeout, read=None)
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncGatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def stream(
        self,
        session_id: str,
        name: str,
        arguments: Any = None,
        call_id: str | None = None,
        *,
        cancel_on_disconnect: bool = False,
    ) -> AsyncGenerator[SseEvent, None]:
        """The call's events as they happen, as ``GatewayClient.stream``; with
        ``cancel_on_disconnect`` the gateway cancels the call when this stream closes before
        its result. An answer that is not an event stream ends it without a result."""
        body = {"name": name, "arguments": arguments, "call_id": call_id}
        params = {"cancel_on_disconnect": "true"} if cancel_on_disconnect else None
        path = f"/v1/sessions/{session_id}/calls"
        async with aconnect_sse(self.http, "POST", path, json=body, params=params) as source:
            if source.response.status_code >= 400:
                await source.response.aread()
                _json(source.response)
            with contextlib.suppress(SSEError):
                async for sse in source.aiter_sse():
                    if sse.data:
                        yield SseEvent(int(sse.id or 0), sse.event, sse.json())

    async def cancel(self, session_id: str, call_id: str) -> bool:
        response = await self.http.delete(f"/v1/sessions/{session_id}/calls/{call_id}")
        return bool(_json(response)["cancelled"])

    async def answer(self, session_id: str, call_id: str, answers: Any) -> bool:
        path = f"/v1/sessions/{session_id}/answers/{call_id}"
        response = await self.http.post(path, json={"answers": answers})
        return bool(_json(response)["delivered"])


def sse_events(source: EventSource) -> Iterator[SseEvent]:
    """The gateway's events on an SSE response; comments and keepalives carry no data and are
    skipped. An event's id is its sequence number, the ``Last-Event-ID`` to resume after."""
    for sse in source.iter_sse():
        if sse.data:
            yield SseEvent(int(sse.id or 0), sse.event, sse.json())


def parse_sse(lines: Iterable[str]) -> Iterator[SseEvent]:
    """The same from lines already read off a response (``response.iter_lines()``)."""
    replay = httpx.Response(
        200,
        headers={"Content-Type": "text/event-stream"},
        content=(f"{line}\n".encode() for line in lines),
    )
    yield from sse_events(EventSource(replay))
