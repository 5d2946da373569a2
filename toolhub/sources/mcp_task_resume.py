"""An external MCP call as one attempt of a fleet call: the remote task it gets is written down,
and the attempt after a lost one polls that task instead of calling the tool again.

Before it calls the tool, the handler (``mcp_calls.py``) asks the session's
``RemoteTaskLedger`` where the call stands. Only workers have one; without it (embedded, or a
dispatcher running an external call itself) the tool is called and polled as it always was.

* **No earlier task**: the tool is called; a task handle that comes back is recorded (fenced to
  this attempt) before the first poll. Should the attempt then end for the fleet's own reasons
  (a hand-back, a lost lease) the task is left running for the next attempt, not cancelled.
* **A task an earlier, lost attempt recorded**: this attempt polls it and never calls the tool.
  The result says so first thing, in the text the model reads and so in the call's record
  ("… the call resumed polling remote task …; the remote tool ran once"). When the task cannot
  be polled (the server no longer knows it, it cannot be reached, the record names another
  tool) the call fails with ``remote_outcome_unknown``: what the remote tool did is unknown,
  and calling it again behind the model's back could do it twice.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolhub.backends.remote_task_ledger import CallAttempt, RemoteTask, RemoteTaskLedger
from toolhub.core import ToolContext, ToolError
from toolhub.core.tool import INTERNAL_REASONS
from toolhub.errors import ErrorCode

from .mcp_task_polling import CreatedTask, RemoteTaskLost, TaskHooks

if TYPE_CHECKING:
    from .mcp_elicit import Asker
    from .mcp_link import ServerLink


class TaskAttempt:
    """One attempt of an external call to ``tool`` on ``link``, as the ledger sees it."""

    def __init__(
        self,
        ctx: ToolContext,
        link: ServerLink,
        tool: str,
        ledger: RemoteTaskLedger | None,
        found: CallAttempt | None,
    ) -> None:
        self.ctx = ctx
        self.link = link
        self.tool = tool
        self.ledger = ledger
        self.found = found
        #: Whether the remote task this attempt polls is on record for the next attempt.
        self.recorded = False

    @classmethod
    async def look_up(cls, ctx: ToolContext, link: ServerLink, tool: str) -> TaskAttempt:
        """Read the ledger off the caller's loop (a Redis round trip on a worker)."""
        ledger = ctx.container.get(RemoteTaskLedger)
        found = None if ledger is None else await asyncio.to_thread(ledger.current, ctx.call_id)
        return cls(ctx, link, tool, ledger, found)

    async def run(
        self, arguments: dict[str, Any], progress: Any, asker: Asker | None = None
    ) -> types.CallToolResult:
        """On the link's loop: resume the inherited task, or call the tool (the server's
        questions go to ``asker``). ``RemoteTaskLost`` when an inherited task cannot be polled
        (``unknown`` turns it into the answer)."""
        inherited = None if self.found is None else self.found.inherited
        hooks = None if self.found is None else TaskHooks(self._created, self._leave_running)
        if inherited is None or hooks is None:
            return await self.link.call(self.tool, arguments, progress, hooks, asker)
        if (inherited.server, inherited.tool) != (self.link.name, self.tool):
            raise RemoteTaskLost(
                f"the record names tool `{inherited.tool}` of MCP server `{inherited.server}`, "
                "not this one"
            )
        self.recorded = True
        result = await self.link.resume(inherited.task_id, progress, hooks)
        note = types.TextContent(type="text", text=self._resumed_note(inherited))
        return result.model_copy(update={"content": [note, *result.content]})

    def unknown(self, lost: RemoteTaskLost) -> ToolError:
        """The answer when the inherited task could not be taken up."""
        found, task = self.found, None if self.found is None else self.found.inherited
        assert found is not None and task is not None
        return ToolError.custom(
            ErrorCode.REMOTE_OUTCOME_UNKNOWN,
            f"[toolhub] {_lead(found)} while it polled remote task {task.task_id} on MCP server "
            f"`{task.server}`, and attempt {found.attempt} of {found.max_attempts} could not "
            f"take the task up: {lost}. Whether the remote tool finished, and what it did, is "
            "unknown; it was not called again. Check its effects before calling it again.",
            may_have_run=True,
            server=task.server,
            task_id=task.task_id,
        )

    async def _created(self, created: CreatedTask) -> None:
        assert self.ledger is not None and self.found is not None
        attempt = self.found.attempt
        task = RemoteTask(
            self.link.name, self.tool, created.task_id, attempt, created.poll_interval_ms
        )
        self.recorded = await asyncio.to_thread(
            self.ledger.remember, self.ctx.call_id, attempt, task
        )

    def _leave_running(self) -> bool:
        """A cancel that ends only this attempt leaves a recorded task to the next one."""
        token = self.ctx.cancel
        return self.recorded and token.cancelled and token.reason in INTERNAL_REASONS

    def _resumed_note(self, task: RemoteTask) -> str:
        found = self.found
        assert found is not None
        note = (
            f"[toolhub] {_lead(found)}; the call resumed polling remote task {task.task_id} on "
            f"MCP server `{task.server}` (attempt {found.attempt} of {found.max_attempts}); "
            "the remote tool ran once"
        )
        if task.attempt > 1:
            return (
                f"{note} in that task, but {task.attempt - 1} earlier attempt(s) were lost "
                "before a task handle came back and may have run it as well."
            )
        return f"{note}."


def _lead(found: CallAttempt) -> str:
    if found.lost:
        return "The worker running this call was lost"
    return "The worker running this call handed it back (it was shutting down)"
