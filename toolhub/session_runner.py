"""The reference ``SubagentRunner``: a sub-agent is an embedded toolhub ``Session`` driven by a
host callback.

toolhub has no model, so the host supplies the agent loop as one function,
``agent(prompt, child_session, emit) -> final text``: it calls tools through the child session
(``child.call_sync(...)``), reports progress with ``emit(text)`` and returns the answer. The
runner gives that function a session of its own — the caller's workspace (or a private git
worktree of it), confined to the request's ``cwd``, under the sub-agent's capability mode
(``read_write`` by default, so no commands and no further ``task``), with a
``SubagentDepth`` in its container — runs it on a thread, forwards its progress, and keeps a
transcript per sub-agent id so ``resume_from`` continues the same sub-agent: the same child
session id and state directory (its todos and other state carry over), and the transcript of
earlier turns in the child's container (``child.resources.get(SubagentTranscript)``).

Transcripts are JSON files under ``state_dir`` (one per sub-agent), so a runner in another
process with the same ``state_dir`` — a re-run on another worker of one host — can resume
too. A cancel ends the run at once (its result says ``cancelled``), closes the child session
(its background commands die) and makes the next ``emit`` raise ``SubagentCancelled``, so a
cooperative host function stops; a function that never emits again finishes unobserved.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from toolhub.assembly import toolhub_home
from toolhub.backends.capture import CapturedOutput, OutputCapture
from toolhub.core import ToolError
from toolhub.session import Session
from toolhub.subagents.base import (
    ProgressCallback,
    SubagentDepth,
    SubagentRequest,
    SubagentResult,
    SubagentStatus,
    too_many_subagents,
    unknown_subagent,
)
from toolhub.toolset import ConfigSource, ToolSetBuilder, ToolSetConfig

logger = logging.getLogger("toolhub.subagents")

KEEP_BYTES = 16_000
TASK_TOOL = "Main:task"

HostAgent = Callable[[str, Session, ProgressCallback], str]


class SubagentCancelled(Exception):
    """Raised by ``emit`` once the run was cancelled: the host function should stop."""


class Turn(BaseModel):
    prompt: str
    status: SubagentStatus | None = None
    text: str = ""
    error: str = ""


class SubagentTranscript(BaseModel):
    """What the runner keeps of one sub-agent, and what its child session can read."""

    resource_id: ClassVar[str] = "subagents.transcript"

    subagent_id: str
    subagent_type: str
    description: str
    workspace: str
    cwd: str
    child_session: str
    turns: list[Turn] = Field(default_factory=list)


class SessionSubagentRunner:
    """``SubagentRunner`` over child sessions. ``config``: the sub-agents' tool set (default:
    the default tool set), filtered by the request's capability mode. Thread-safe."""

    def __init__(
        self,
        agent: HostAgent,
        *,
        config: ConfigSource = None,
        state_dir: str | Path | None = None,
        builder: ToolSetBuilder | None = None,
    ) -> None:
        self.agent = agent
        self.config = ToolSetConfig.load(config)
        self.state_dir = Path(state_dir) if state_dir else toolhub_home() / "subagents"
        self.builder = builder
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._transcripts: dict[str, SubagentTranscript] = {}

    # -- the protocol ---------------------------------------------------------------------------

    def start(
        self,
        request: SubagentRequest,
        *,
        on_progress: ProgressCallback | None = None,
        log_path: Path | None = None,
        max_concurrent: int | None = None,
    ) -> _Run:
        with self._lock:
            # Finished runs are only kept until the next start: their state is the transcript.
            self._runs = {sid: r for sid, r in self._runs.items() if r.result is None}
            running = list(self._runs.values())
            if max_concurrent is not None and len(running) >= max_concurrent:
                raise too_many_subagents(max_concurrent)
            transcript = self._transcript_for(request)
            if any(r.subagent_id == transcript.subagent_id for r in running):
                raise ToolError.invalid_arguments(
                    f"sub-agent `{transcript.subagent_id}` is still running; wait for it to "
                    "finish before resuming it"
                )
            transcript.turns.append(Turn(prompt=request.prompt))
            self._transcripts[transcript.subagent_id] = transcript
            self._save(transcript)  # a re-run elsewhere finds the turn that was under way
            run = _Run(self, request, transcript, on_progress, OutputCapture(KEEP_BYTES, log_path))
            self._runs[transcript.subagent_id] = run
        run.begin()
        return run

    def knows(self, subagent_id: str) -> bool:
        with self._lock:
            return self._load(subagent_id) is not None

    def cancel(self, subagent_id: str) -> bool:
        with self._lock:
            run = self._runs.get(subagent_id)
        return run is not None and run.cancel("cancelled")

    def transcript(self, subagent_id: str) -> SubagentTranscript | None:
        with self._lock:
            found = self._load(subagent_id)
            return None if found is None else found.model_copy(deep=True)

    def close(self) -> None:
        """Cancel every running sub-agent: a closed session leaves none behind."""
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            run.cancel("cancelled")

    # -- state ----------------------------------------------------------------------------------

    def _transcript_for(self, request: SubagentRequest) -> SubagentTranscript:
        if request.resume_from:
            found = self._load(request.resume_from)
            if found is None:
                raise unknown_subagent(request.resume_from, self._known())
            return found
        if request.subagent_id:  # ids assigned ahead (a fleet): a re-run continues the same one
            found = self._load(request.subagent_id)
            if found is not None:
                if found.turns and found.turns[-1].status is None:
                    found.turns.pop()  # the turn whose run was lost is run again
                return found
        sid = request.subagent_id or f"agent-{uuid.uuid4().hex[:12]}"
        return SubagentTranscript(
            subagent_id=sid,
            subagent_type=request.subagent_type,
            description=request.description,
            workspace=request.workspace,
            cwd=request.cwd,
            child_session=f"{request.parent_session or 'session'}.{sid}",
        )

    def _load(self, subagent_id: str) -> SubagentTranscript | None:
        """The transcript: this process's while it runs a turn of it, else the stored one (a
        runner in another process with the same ``state_dir`` may have moved it on)."""
        found = self._transcripts.get(subagent_id)
        run = self._runs.get(subagent_id)
        if found is not None and run is not None and run.result is None:
            return found
        path = self._path(subagent_id)
        if path is None or not path.is_file():
            return found
        try:
            found = SubagentTranscript.model_validate_json(path.read_text())
        except (OSError, ValueError):
            logger.warning("unreadable sub-agent transcript %s", path)
            return None
        self._transcripts[subagent_id] = found
        return found

    def _path(self, subagent_id: str) -> Path | None:
        if not subagent_id.replace("-", "").replace("_", "").isalnum():
            return None  # an id is never a path
        return self.state_dir / f"{subagent_id}.json"

    def _known(self) -> list[str]:
        return sorted(self._transcripts)

    def _save(self, transcript: SubagentTranscript) -> None:
        path = self._path(transcript.subagent_id)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(transcript.model_dump(mode="json")))
        tmp.replace(path)

    def _child(self, request: SubagentRequest, transcript: SubagentTranscript) -> Session:
        cfg = self.config.model_copy(update={"mode": request.capability_mode})
        if cfg.tools is not None and request.depth >= request.max_depth:
            cfg = cfg.model_copy(update={"tools": [t for t in cfg.tools if t.id != TASK_TOOL]})
        child = Session.embedded(
            cfg,
            transcript.cwd,
            session_id=transcript.child_session,
            state_dir=self.state_dir / transcript.subagent_id / "session",
            builder=self.builder,
        )
        child.resources.set(SubagentDepth(request.depth))
        child.resources.set(transcript.model_copy(deep=True))
        return child


class _Run:
    """One turn of one sub-agent, on its own thread."""

    def __init__(
        self,
        runner: SessionSubagentRunner,
        request: SubagentRequest,
        transcript: SubagentTranscript,
        on_progress: ProgressCallback | None,
        capture: OutputCapture,
    ) -> None:
        self._runner = runner
        self._request = request
        self._transcript = transcript
        self._on_progress = on_progress
        self._capture = capture
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: SubagentResult | None = None
        self._callbacks: list[Callable[[SubagentResult], None]] = []
        self._child: Session | None = None
        self._started = time.monotonic()

    @property
    def subagent_id(self) -> str:
        return self._transcript.subagent_id

    @property
    def result(self) -> SubagentResult | None:
        return self._result

    def output(self) -> CapturedOutput:
        return self._capture.snapshot()

    def wait(self, timeout: float | None = None) -> SubagentResult | None:
        self._done.wait(timeout)
        return self._result

    def add_done_callback(self, callback: Callable[[SubagentResult], None]) -> None:
        with self._lock:
            if self._result is None:
                self._callbacks.append(callback)
                return
            result = self._result
        callback(result)

    def cancel(self, reason: str = "cancelled") -> bool:
        return self._finish("cancelled", error=f"the sub-agent was {reason}")

    def begin(self) -> None:
        thread = threading.Thread(target=self._main, name=f"subagent-{self.subagent_id}")
        thread.daemon = True
        thread.start()

    def emit(self, text: str) -> None:
        """The host function's progress: logged, kept, forwarded."""
        if self._result is not None:
            raise SubagentCancelled(self.subagent_id)
        if not text:
            return
        self._capture.write(text.encode())
        self._forward(text)

    def _forward(self, text: str) -> None:
        if self._on_progress is not None:
            try:
                self._on_progress(text)
            except Exception:
                logger.exception("sub-agent %s: progress callback failed", self.subagent_id)

    def _main(self) -> None:
        try:
            child = self._runner._child(self._request, self._transcript)
        except Exception as exc:
            self._finish("failed", error=f"the sub-agent's session could not be made: {exc}")
            return
        with self._lock:
            closed = self._result is not None
            self._child = None if closed else child
        if closed:
            child.close()
            return
        try:
            text = self._runner.agent(self._request.prompt, child, self.emit)
        except SubagentCancelled:
            self._finish("cancelled", error="the sub-agent was cancelled")
        except Exception as exc:
            logger.info("sub-agent %s failed: %r", self.subagent_id, exc)
            self._finish("failed", error=f"{type(exc).__name__}: {exc}")
        else:
            self._finish("completed", text=str(text))

    def _finish(self, status: SubagentStatus, *, text: str = "", error: str = "") -> bool:
        """The one end of the run: recorded, its answer appended to the output (and forwarded,
        so a consumer of the progress alone reads it too), then the waiters woken."""
        with self._lock:
            if self._result is not None:
                return False
            turn = len(self._transcript.turns)
            self._result = SubagentResult(
                subagent_id=self.subagent_id,
                status=status,
                text=text,
                error=error,
                duration_s=time.monotonic() - self._started,
                turn=turn,
            )
            callbacks, self._callbacks = self._callbacks, []
            child, self._child = self._child, None
            result = self._result
        self._record(result)
        closing = _closing_lines(result)
        self._capture.write(closing.encode())
        self._capture.close()
        self._forward(closing)
        if child is not None:
            child.close()
        self._done.set()
        for callback in callbacks:
            try:
                callback(result)
            except Exception:
                logger.exception("sub-agent %s: done callback failed", self.subagent_id)
        return True

    def _record(self, result: SubagentResult) -> None:
        with self._runner._lock:
            last = self._transcript.turns[-1]
            last.status, last.text, last.error = result.status, result.text, result.error
            try:
                self._runner._save(self._transcript)
            except OSError:
                logger.exception("sub-agent %s: transcript not saved", self.subagent_id)


def _closing_lines(result: SubagentResult) -> str:
    """The end of a run's output, so whoever reads only the output (``task_output``, the
    completion reminder, a log) also reads the answer."""
    if result.status == "completed":
        return f"\n[sub-agent {result.subagent_id} finished]\n{result.text}\n"
    return f"\n[sub-agent {result.subagent_id} {result.status}] {result.error}\n"
