"""Claims made for optimistic runs that outlast their window (``optimistic.py``).

An optimistic run starts before its call is claimed. One still running ``optimistic_seconds``
after it started is claimed by this worker's ``LateClaimer`` thread: the ordinary claim, made
on the run's behalf while it runs. From then on the call shows ``running``, holds a lease the
lease keeper renews, and a cancel is answered at once, as for any inline call; and the sweep
never mistakes it for a message a dead worker took (its claim deadline is half a lease, far
beyond the window). When the run ends, its own thread finds the claim in its ``Speculation``
and settles as an ordinary attempt.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from toolhub.core.tool import INTERNAL_REASONS
from toolhub.distributed.records import Claim, cancelled_result
from toolhub.logs import call_context
from workers.lifecycle.metrics import metrics

from .emitter import Emitter
from .running import Running

if TYPE_CHECKING:
    from .runtime import WorkerRuntime

logger = logging.getLogger("toolhub.worker")


@dataclass(slots=True, eq=False)
class Speculation:
    """One optimistic run, and who claims it: the run's own thread when it ends within its
    window, else the ``LateClaimer``. ``take`` says which: it answers True once, to the
    first of the two to ask."""

    message: dict[str, Any]
    running: Running
    #: The name the call was made under and the tool's id: for the cancelled terminal.
    name: str
    tool_id: str
    #: ``time.monotonic()`` past which the claimer takes the run over.
    due: float
    claim: Claim | None = None
    emitter: Emitter | None = None
    _taken: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _claimed: threading.Event = field(default_factory=threading.Event)

    def take(self) -> bool:
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True

    def settle_claim(self, claim: Claim | None, emitter: Emitter | None) -> None:
        """The claimer's answer, for the run's thread waiting in ``late_claim``."""
        self.claim, self.emitter = claim, emitter
        self._claimed.set()

    def late_claim(self) -> tuple[Claim | None, Emitter | None]:
        """For the run's thread, once ``take`` said no: the claimer's claim (None when Redis
        did not answer it) and the emitter of the attempt it claimed."""
        self._claimed.wait()
        return self.claim, self.emitter

    def answer_cancel(self) -> None:
        """The run's cancel hook: once claimed, a cancel is published at once (the tool's late
        result is then refused by the record), as ``calls.py`` does for any inline call."""
        token, emitter = self.running.token, self.emitter
        if emitter is not None and token.cancelled and token.reason not in INTERNAL_REASONS:
            emitter.finish(
                cancelled_result(self.name, self.running.call_id, self.tool_id, token.reason)
            )


class Speculations:
    """This worker's optimistic runs in progress."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, Speculation] = {}

    def add(self, speculation: Speculation) -> None:
        with self._lock:
            self._runs[id(speculation)] = speculation

    def discard(self, speculation: Speculation) -> None:
        with self._lock:
            self._runs.pop(id(speculation), None)

    def due(self, now: float) -> list[Speculation]:
        with self._lock:
            return [run for run in self._runs.values() if run.due <= now]


class LateClaimer(threading.Thread):
    """Claims every optimistic run past its window, checking twice a window. It is stopped
    with the other worker threads, once the pool's calls have ended: a run still going at the
    soft-shutdown hand-back has been claimed, so it is handed back as any claimed call."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__(name="toolhub-late-claims", daemon=True)
        self.runtime = runtime
        self.stop_event = threading.Event()

    def run(self) -> None:
        tick = max(self.runtime.settings.optimistic_seconds / 2, 0.01)
        while not self.stop_event.wait(tick):
            for speculation in self.runtime.speculations.due(time.monotonic()):
                if speculation.take():
                    self.claim(speculation)

    def claim(self, speculation: Speculation) -> None:
        runtime, message = self.runtime, speculation.message
        claim: Claim | None = None
        emitter: Emitter | None = None
        with call_context(speculation.running.call_id):
            try:
                claim = runtime.records.claim(message, runtime.name)
                if claim.action == "run":
                    speculation.running.attempt = claim.attempt
                    emitter = Emitter(runtime, speculation.running, message["session_id"])
                metrics.optimistic.labels("late_claimed").inc()
            except RedisError as exc:
                logger.warning("call %s: late claim failed: %s", message["call_id"], exc)
            except Exception:
                logger.exception("call %s: late claim failed", message["call_id"])
            finally:
                speculation.settle_claim(claim, emitter)
            speculation.answer_cancel()  # a cancel that came between the claim and the emitter

    def stop(self) -> None:
        self.stop_event.set()
