"""Remote toolhub gateways (config ``hubs:``) as a tool source of the lowest priority.

At attach time each hub gets a remote session (id ``hub-<local session id>``, so a dispatcher
and its workers share one remote session and its state) and its tool definitions join the
merge under their own names: a hub tool is skipped when the baseline or an MCP server already
has the name. A call is forwarded as an SSE call; progress streams through, a cancelled call
cancels the remote one, and an ``ask_user`` question on the hub is asked here (the local answer
box) and its answer sent back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolhub.answers import AnswerBox
from toolhub.core import CallResult, Outcome, Progress, ToolContext, ToolError, ToolOutput
from toolhub.env_refs import ExpansionRefused, expand_env
from toolhub.redaction import redact
from toolhub.toolset import ExternalSpec, HubConfig, ToolSet

from .gateway_api import GATEWAY_FAILURES, AsyncGatewayClient, GatewayClient, GatewayError
from .merge import ExternalSources, SourceTool

logger = logging.getLogger("toolhub.sources.hub")

CONNECT_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 3600.0


@dataclass
class Hub:
    name: str
    url: str
    token: str | None
    remote_session: str = ""
    tools: list[str] = field(default_factory=list)


@dataclass
class HubConnections:
    """The hubs of one tool set; ``close()`` removes their tools."""

    sources: ExternalSources
    hubs: dict[str, Hub] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def close(self) -> None:
        for name in self.hubs:
            self.sources.remove(f"hub:{name}")

    async def aclose(self) -> None:
        self.close()


def attach_hubs_sync(
    toolset: ToolSet, hubs: Mapping[str, HubConfig], *, session_id: str
) -> HubConnections:
    """Open a remote session on every hub and merge its tools in (failures become warnings)."""
    connections = HubConnections(ExternalSources.of(toolset))
    for name, config in hubs.items():
        try:
            url, token = expand_env(config.url).rstrip("/"), expand_env(config.token or "")
        except ExpansionRefused as refused:
            connections.warnings.append(f"hub {name!r} not connected: {refused}")
            continue
        hub = Hub(name, url, token or None)
        try:
            specs = _discover(hub, session_id)
        except GATEWAY_FAILURES as exc:
            connections.warnings.append(redact(f"hub {name!r} ({hub.url}) unavailable: {exc}"))
            continue
        tools = [SourceTool(spec, _handler(hub, spec.name)) for spec in specs]
        lost = connections.sources.set_group(f"hub:{name}", tools, priority="hub")
        hub.tools = [t.spec.name for t in tools if t.spec.name not in lost]
        connections.hubs[name] = hub
    for warning in connections.warnings:
        logger.warning(warning)
    return connections


def _discover(hub: Hub, session_id: str) -> list[ExternalSpec]:
    with GatewayClient(
        hub.url, hub.token, timeout=CONNECT_TIMEOUT_S, read_timeout=CONNECT_TIMEOUT_S
    ) as api:
        created = api.create_session(session_id=f"hub-{session_id}"[:128])
        hub.remote_session = created["session_id"]
        return [
            ExternalSpec(d["name"], d.get("description", ""), d["inputSchema"], {"hub": hub.name})
            for d in api.tools(hub.remote_session, format="mcp")
        ]


def _handler(hub: Hub, name: str) -> Any:
    async def handle(args: dict[str, Any], ctx: ToolContext) -> AsyncIterator[Progress | Outcome]:
        remote_id = f"{ctx.call_id}.{os.urandom(3).hex()}"
        finished = False
        # A cancel reaches the hub at once, from the canceller's thread: it must not depend on
        # this generator (or even its event loop) still running.
        remove = ctx.cancel.on_cancel(lambda: _cancel_remote(hub, remote_id))
        async with AsyncGatewayClient(hub.url, hub.token, timeout=CONNECT_TIMEOUT_S) as api:
            answering: asyncio.Task[None] | None = None
            events = api.stream(
                hub.remote_session, name, args, remote_id, cancel_on_disconnect=True
            )
            try:
                async with contextlib.aclosing(events):
                    async for event in events:
                        if event.event == "progress":
                            item = Progress.from_dict(event.data)
                            if item.kind == "custom" and item.subkind == "input_required":
                                item, answering = _relay_question(hub, api, ctx, remote_id, item)
                            yield item
                        elif event.event == "result":
                            finished = True
                            yield _outcome(CallResult.from_dict(event.data), name)
                            return
                raise ToolError.execution(f"hub {hub.name!r} closed the call without a result")
            except GatewayError as err:
                detail = str(err.detail)[:2000]
                raise ToolError.execution(
                    f"hub {hub.name!r} answered {err.status}: {detail}"
                ) from None
            finally:
                remove()
                if answering is not None:
                    answering.cancel()
                if not finished and not ctx.cancel.cancelled:
                    with contextlib.suppress(*GATEWAY_FAILURES):
                        await api.cancel(hub.remote_session, remote_id)

    return handle


def _cancel_remote(hub: Hub, remote_id: str) -> None:
    def send() -> None:
        with (
            contextlib.suppress(*GATEWAY_FAILURES),
            GatewayClient(hub.url, hub.token, timeout=10, read_timeout=10) as api,
        ):
            api.cancel(hub.remote_session, remote_id)

    threading.Thread(target=send, name="toolhub-hub-cancel", daemon=True).start()


def _relay_question(
    hub: Hub, api: AsyncGatewayClient, ctx: ToolContext, remote_id: str, item: Progress
) -> tuple[Progress, asyncio.Task[None] | None]:
    """Post the hub's question to the local answer box under the local call id, and send the
    local answer to the hub when it comes."""
    payload = item.payload if isinstance(item.payload, dict) else {}
    questions = payload.get("questions") or []
    box = ctx.container.get(AnswerBox)
    if box is None:
        return item, None
    box.post(ctx.call_id, questions)

    async def forward() -> None:
        answers = await asyncio.to_thread(box.wait, ctx.call_id, ANSWER_TIMEOUT_S)
        if answers is not None:
            await api.answer(hub.remote_session, remote_id, answers)

    local = Progress.custom("input_required", {**payload, "call_id": ctx.call_id})
    return local, asyncio.ensure_future(forward())


def _outcome(result: CallResult, name: str) -> Outcome:
    if result.error is not None:
        return Outcome(error=result.error)
    value = result.output.value if result.output is not None else None
    tool_id = f"External:{name}"
    output = (
        ToolOutput.plain_text(value, tool_id)
        if isinstance(value, str)
        else ToolOutput.dynamic(value, tool_id)
    )
    return Outcome(output, result.prompt_text)
