"""Sub-agents: the protocol the ``task`` tool relies on, whoever runs the agent.

toolhub runs no model, so a sub-agent is something the host provides: a ``SubagentRunner`` in
the session's container. The tool hands it a ``SubagentRequest`` (plain data, so it crosses
process boundaries unchanged: a worker runs the same request a dispatcher validated) and gets a
``SubagentRun`` back: its progress so far, its result once it has one, and a cancel that never
waits on the agent. Every run has a sub-agent id; a runner that keeps the transcript under that
id can continue it (``resume_from``).

The reference runner (``toolhub/session_runner.py``, ``SessionSubagentRunner``: it builds a
toolhub ``Session`` and so sits beside the session, above the tools) drives a child session
with a host callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from toolhub.backends.capture import CapturedOutput
from toolhub.core import CapabilityMode, ErrorKind, ToolError
from toolhub.errors import ErrorCode

SubagentStatus = Literal["completed", "failed", "cancelled"]
ProgressCallback = Callable[[str], None]

#: How a host puts a runner into a session, for the error that says one is missing.
HOW_TO_PROVIDE = (
    "the host must put a SubagentRunner into the session's container, e.g. "
    "`session.resources.set(SessionSubagentRunner(agent), SubagentRunner)` "
    "(toolhub.session_runner); on a fleet, provide it on the workers through a "
    "plugin's `builder.provide(SubagentRunner, factory)`"
)


class SubagentRequest(BaseModel):
    """One delegation, as the ``task`` tool validated it. Paths are absolute and already
    confined: ``workspace`` is the root the sub-agent may touch (the caller's workspace, or a
    private git worktree of it) and ``cwd`` a directory inside it."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    description: str
    subagent_type: str = "general-purpose"
    workspace: str
    cwd: str
    capability_mode: CapabilityMode = CapabilityMode.READ_WRITE
    parent_session: str = ""
    parent_call: str = ""
    depth: int = 1
    """The sub-agent's own depth (the caller's plus one)."""
    max_depth: int = 1
    subagent_id: str | None = None
    """Set by whoever assigns ids ahead of the run (a fleet: so a re-run resumes the same one)."""
    resume_from: str | None = None


class SubagentResult(BaseModel):
    """How a run ended. ``text`` is the sub-agent's final answer (empty unless completed)."""

    model_config = ConfigDict(frozen=True)

    subagent_id: str
    status: SubagentStatus
    text: str = ""
    error: str = ""
    duration_s: float = 0.0
    turn: int = 1
    """Which prompt of this sub-agent it was: above 1 after ``resume_from``."""


@dataclass(frozen=True, slots=True)
class SubagentDepth:
    """In a sub-agent's own container: how deep it is, so a ``task`` call there is refused
    once the depth limit is reached, whatever tool set the host gave it."""

    depth: int


@runtime_checkable
class SubagentRun(Protocol):
    """A started sub-agent. Every method is safe from any thread and returns promptly."""

    @property
    def subagent_id(self) -> str: ...

    @property
    def result(self) -> SubagentResult | None: ...

    def output(self) -> CapturedOutput:
        """The progress it has reported so far (the transcript text of this turn)."""
        ...

    def wait(self, timeout: float | None = None) -> SubagentResult | None:
        """The result, or None if it is still running after ``timeout`` seconds."""
        ...

    def add_done_callback(self, callback: Callable[[SubagentResult], None]) -> None:
        """Run ``callback(result)`` once it has ended (now, if it already has)."""
        ...

    def cancel(self, reason: str = "cancelled") -> bool:
        """End it now (its result says ``cancelled``); False when it had already ended."""
        ...


@runtime_checkable
class SubagentRunner(Protocol):
    """Start, observe, cancel and resume sub-agents."""

    def start(
        self,
        request: SubagentRequest,
        *,
        on_progress: ProgressCallback | None = None,
        log_path: Path | None = None,
        max_concurrent: int | None = None,
    ) -> SubagentRun:
        """Start the sub-agent now (a new one, or ``request.resume_from`` continued).

        Raises ``unknown_subagent`` for a ``resume_from`` it has no state of, and
        ``too_many_subagents`` when ``max_concurrent`` of its runs are already running."""
        ...

    def knows(self, subagent_id: str) -> bool:
        """Whether ``resume_from=subagent_id`` can continue a sub-agent."""
        ...

    def cancel(self, subagent_id: str) -> bool:
        """Cancel the running turn of a sub-agent; False when none is running."""
        ...


def unknown_subagent(subagent_id: str, known: list[str]) -> ToolError:
    listed = ", ".join(known[-10:]) if known else "none"
    return ToolError(
        ErrorKind.NOT_FOUND,
        f"no sub-agent `{subagent_id}` to resume from; known sub-agents: {listed}",
        {"code": ErrorCode.UNKNOWN_SUBAGENT.value, "subagent_id": subagent_id},
    )


def too_many_subagents(limit: int) -> ToolError:
    return ToolError(
        ErrorKind.RATE_LIMITED,
        f"{limit} sub-agent(s) are already running, the most this session allows "
        "(`max_concurrent`); wait for one to finish or stop one first",
        {"code": ErrorCode.TOO_MANY_SUBAGENTS.value, "max_concurrent": limit},
    )


def depth_exceeded(depth: int, max_depth: int) -> ToolError:
    return ToolError(
        ErrorKind.PERMISSION_DENIED,
        f"a sub-agent at depth {depth} cannot start sub-agents of its own (the depth limit is "
        f"{max_depth}); do the work directly",
        {"code": ErrorCode.SUBAGENT_DEPTH_EXCEEDED.value, "depth": depth, "max_depth": max_depth},
    )


def runner_missing() -> ToolError:
    return ToolError.custom(
        ErrorCode.NO_SUBAGENT_RUNNER.value,
        f"no sub-agent runner in this session: {HOW_TO_PROVIDE}",
        resource="SubagentRunner",
    )
