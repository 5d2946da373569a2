"""An MCP server's tool as a toolhub external handler: the call runs on the link's background
loop (the loop its connection belongs to), its progress streams back into the caller's loop,
and a cancelled toolhub call cancels the MCP request (``notifications/cancelled``, or
``tasks/cancel`` for a task) and waits, bounded, until the server has been told. On a worker,
a remote task is recorded for the call and taken up by the attempt after a lost one
(``mcp_task_resume.py``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolhub.core import Outcome, Progress, ToolContext, ToolError

from .mcp_elicit import Asker
from .mcp_outcome import outcome_of
from .mcp_task_polling import RemoteTaskLost
from .mcp_task_resume import TaskAttempt

if TYPE_CHECKING:
    from .mcp_link import ServerLink

#: How long a cancelled call waits for the server to have been told of it.
CANCEL_NOTICE_S = 6.0


def external_handler(link: ServerLink, tool: str, client: str) -> Any:
    """The external handler of ``tool`` on ``link``, named ``client`` in the tool set."""
    tool_id = f"External:{client}"

    async def handle(args: dict[str, Any], ctx: ToolContext) -> AsyncIterator[Progress | Outcome]:
        caller = asyncio.get_running_loop()
        queue: asyncio.Queue[Progress] = asyncio.Queue()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            item = (
                Progress.of_text(message)
                if message
                else Progress.custom("mcp_progress", {"progress": progress, "total": total})
            )
            caller.call_soon_threadsafe(queue.put_nowait, item)

        attempt = await TaskAttempt.look_up(ctx, link, tool)
        settled = threading.Event()
        # The server's questions reach this call's caller as ``input_required`` progress.
        asker = Asker(ctx, lambda item: caller.call_soon_threadsafe(queue.put_nowait, item))

        async def run() -> types.CallToolResult:
            link.askers.append(asker)
            try:
                return await attempt.run(args, on_progress, asker)
            finally:
                link.askers.remove(asker)
                settled.set()  # after a cancel, once the server was told (tasks/cancel)

        future = link.owner.loop.submit(run())

        def cancel() -> None:
            future.cancel()

        remove = ctx.cancel.on_cancel(cancel)
        done = asyncio.wrap_future(future)
        try:
            while not done.done():
                getter: asyncio.Future[Any] = asyncio.ensure_future(queue.get())
                await asyncio.wait([getter, done], return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            while not queue.empty():
                yield queue.get_nowait()
            if done.cancelled():
                # The future says cancelled at once; its coroutine may still be telling the
                # server. Wait for that (bounded), or closing the session could cut it off.
                await asyncio.to_thread(settled.wait, CANCEL_NOTICE_S)
                raise ToolError.cancelled()
            try:
                result = done.result()
            except RemoteTaskLost as lost:
                raise attempt.unknown(lost) from None
            yield outcome_of(result, tool_id)
        finally:
            remove()
            if not future.done():
                future.cancel()

    return handle
