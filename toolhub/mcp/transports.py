"""Running the MCP server on stdio or on streamable HTTP (``/mcp``).

Over HTTP the same ``Guard`` as the gateway's checks each request: the bearer token
(``TOOLHUB_API_TOKEN``; each of its comma-separated tokens is a principal of its own), one
``Authorization`` and one ``Host`` header, the body limit. An MCP session and its requests and
tasks belong to the principal that opened it (``owners.py``). The server holds one session in
one workspace, so it is one tenant's: it takes no named API keys. Over stdio fd 0
and fd 1 point at the null device and at stderr while serving, so a tool's child process can
never read or write the protocol stream (``stdio_wire.py``); the first Ctrl-C stops the server.

Either way a cancelled request gets no answer (the spec: the receiver SHOULD NOT respond), and
stdin's EOF ends the stdio server quietly: the calls still running are cancelled, and nothing is
written for them.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
import threading
from typing import TYPE_CHECKING, Any, cast

import anyio
import uvicorn
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from toolhub.http_guard import DEFAULT_MAX_BODY, Guard
from toolhub.process_heap import freeze_startup_heap, space_full_collections
from toolhub.redaction import redact_access_log

from .owners import SessionOwner
from .server import ToolhubMcpServer
from .stdio_wire import StdinLines, claimed_stdio

if TYPE_CHECKING:
    from toolhub.session import Session

MCP_PATH = "/mcp"


def run_stdio(session: Session) -> None:
    """Serve until stdin's EOF. The first Ctrl-C (SIGINT) stops it: the calls still running
    are cancelled, then ``KeyboardInterrupt`` is raised for the caller to end the process."""
    interrupted = False

    async def main() -> None:
        nonlocal interrupted
        toolhub_mcp = ToolhubMcpServer(session)
        mcp = toolhub_mcp.server
        eof = anyio.Event()
        loop = asyncio.get_running_loop()

        def stop() -> None:
            nonlocal interrupted
            interrupted = True
            everything.cancel()

        try:
            with claimed_stdio() as (wire_in, wire_out), anyio.CancelScope() as everything:
                if threading.current_thread() is threading.main_thread():
                    loop.add_signal_handler(signal.SIGINT, stop)
                stdin = StdinLines(wire_in)
                stdout = anyio.wrap_file(io.TextIOWrapper(wire_out, encoding="utf-8"))
                async with (
                    stdio_server(cast(Any, stdin), stdout) as (read, write),
                    anyio.create_task_group() as tasks,
                ):
                    sink, source = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                    out, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
                    quick = Unanswered()
                    tasks.start_soon(answer_malformed, read, sink, write, eof, quick)
                    tasks.start_soon(quiet_after_eof, outgoing, write, eof, quick)
                    async with out:
                        await mcp.run(source, out, mcp.create_initialization_options())
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            toolhub_mcp.close()

    anyio.run(main)
    if interrupted:
        raise KeyboardInterrupt


async def answer_malformed(
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    write: MemoryObjectSendStream[SessionMessage],
    eof: anyio.Event,
    quick: Unanswered,
) -> None:
    """Pass the messages on; answer each line that is not one, as JSON-RPC 2.0 requires:
    ``-32700 Parse error`` for text that is not JSON, ``-32600 Invalid Request`` for JSON
    that is not a JSON-RPC message, with ``id: null``. (The SDK hands such lines to the
    server as exceptions, which it only logs: the client would wait for an answer forever.)
    Blank lines are skipped. Sets ``eof`` when stdin ends, before the server hears of it;
    the server hears of it once the requests piped before it that are not tool calls (quick:
    ``initialize``, ``tools/list``, ``ping``) are answered (``quick``)."""
    async with sink:
        async for item in read:
            if not isinstance(item, Exception):
                message = item.message
                if isinstance(message, JSONRPCRequest) and message.method != "tools/call":
                    quick.asked(message.id)
                await sink.send(item)
                continue
            reply = _malformed_reply(item)
            if reply is not None:
                await write.send(SessionMessage(reply))
        eof.set()
        await quick.all_answered()


async def quiet_after_eof(
    outgoing: MemoryObjectReceiveStream[SessionMessage],
    write: MemoryObjectSendStream[SessionMessage],
    eof: anyio.Event,
    quick: Unanswered,
) -> None:
    """The server's frames to stdout, until stdin's EOF; after it only the answers of requests
    that were finished. EOF is how an MCP client shuts a stdio server down: the SDK then
    cancels the requests still running and would answer each with "Connection closed", and
    their progress could still trickle out, to a client that has said it is done. (Answers
    that are ready still go out: a piped ``initialize``, ``tools/list``, EOF is answered.)"""
    async with write:
        async for item in outgoing:
            if isinstance(item.message, JSONRPCResponse | JSONRPCError):
                quick.answered(item.message.id)
            if not eof.is_set() or _finished_answer(item.message):
                await write.send(item)


class Unanswered:
    """The ids of requests (not tool calls) passed on and not answered yet."""

    def __init__(self) -> None:
        self._ids: set[Any] = set()
        self._none = anyio.Event()
        self._none.set()

    def asked(self, request_id: Any) -> None:
        self._ids.add(request_id)
        if self._none.is_set():
            self._none = anyio.Event()

    def answered(self, request_id: Any) -> None:
        self._ids.discard(request_id)
        if not self._ids:
            self._none.set()

    async def all_answered(self) -> None:
        await self._none.wait()


def _finished_answer(message: JSONRPCMessage) -> bool:
    if isinstance(message, JSONRPCError):
        return message.error.code != CONNECTION_CLOSED
    return isinstance(message, JSONRPCResponse)


def _malformed_reply(exc: Exception) -> JSONRPCError | None:
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    line = errors[0].get("input") if errors else None
    if isinstance(line, str) and not line.strip():
        return None
    parse = any(e.get("type") == "json_invalid" for e in errors) or not errors
    code, message = (PARSE_ERROR, "Parse error") if parse else (INVALID_REQUEST, "Invalid Request")
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


def http_app(session: Session, *, host: str, token: str | None = None) -> Any:
    """The streamable-HTTP ASGI app, guarded by the bearer token when one is set, its MCP
    sessions bound to the principal that opened them."""
    mcp = ToolhubMcpServer(session).server
    app = mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    owned = SessionOwner(SilentCancellation(app))
    return Guard(owned, token=token, max_body_bytes=DEFAULT_MAX_BODY)


class SilentCancellation:
    """Keeps the answer of a cancelled request off the wire.

    On the 2025 streamable-HTTP wire the SDK ends the SSE stream of a cancelled request with a
    ``-32800 Request cancelled`` error, though the spec says a cancelled request SHOULD NOT be
    answered. This drops that one event; the stream then just ends (the client stopped waiting
    when it cancelled, and with no event store there is nothing to resume)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return

        async def quiet(message: Any) -> None:
            if message["type"] == "http.response.body" and _cancelled_answer(message["body"]):
                if message.get("more_body", False):
                    return
                message = {**message, "body": b""}
            await send(message)

        await self.app(scope, receive, quiet)


def _cancelled_answer(body: bytes) -> bool:
    """Whether an SSE chunk is one event carrying a ``-32800`` JSON-RPC error."""
    if str(REQUEST_CANCELLED).encode() not in body:
        return False
    lines = body.decode("utf-8", "replace").splitlines()
    data = "\n".join(line[5:].removeprefix(" ") for line in lines if line.startswith("data:"))
    try:
        message = json.loads(data)
    except ValueError:
        return False
    error = message.get("error") if isinstance(message, dict) else None
    return isinstance(error, dict) and error.get("code") == REQUEST_CANCELLED


def run_http(session: Session, *, host: str, port: int, token: str | None = None) -> None:
    redact_access_log()
    app = http_app(session, host=host, token=token)
    freeze_startup_heap()
    space_full_collections()
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=5,
    )
