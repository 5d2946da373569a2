"""The worker's Celery consumer and event dispatcher, with task events published in batches.

Celery buffers task events (``task-received``, ``task-started``, ``task-succeeded`` …) and asks
the consumer to flush them; the stock consumer flushes at once, so every event of every call
costs a wake-up of the consumer's event loop and a ``PUBLISH`` on the thread that also
receives the messages (with no-op calls, a large share of that thread's time). This
consumer flushes at most every ``EVENT_FLUSH_SECONDS``, as one ``task.multi`` message: the
event batch Celery's receivers — Flower among them — already understand. Events are unchanged,
in order, and at most that much later; the batch still waiting at shutdown is flushed by
Celery's ``Events`` step when it closes.

The stock dispatcher also flushes by itself whenever 24 events are waiting, from whichever
thread sent the 24th: under load that is a pool thread, every eight calls, each flush a
publish taken under the dispatcher's lock while the other threads wait to send. Its limit is
raised to ``EVENT_BUFFER_LIMIT`` here, so the window does the flushing and the limit only
bounds the memory a burst can hold.
"""

from __future__ import annotations

from typing import Any

from celery.app.events import Events
from celery.events.dispatcher import EventDispatcher
from celery.worker.consumer import Consumer as CeleryConsumer

#: How late a task event may reach Flower; each flush is one publish for all buffered events.
EVENT_FLUSH_SECONDS = 0.05
#: Buffered task events that force a flush before the window ends (about 1 KB each): only a
#: worker running more than ~6,000 calls a second reaches it.
EVENT_BUFFER_LIMIT = 1000


class Consumer(CeleryConsumer):  # type: ignore[misc]
    _event_flush_pending = False

    def on_send_event_buffered(self) -> None:
        """Called (from any thread) for each buffered event: schedule one flush per window."""
        if self.hub is None or self._event_flush_pending:
            return
        self._event_flush_pending = True
        self.hub.call_soon(self._schedule_event_flush)

    def _schedule_event_flush(self) -> None:
        """On the consumer's loop: the flush runs when the window is over."""
        self.hub.call_later(EVENT_FLUSH_SECONDS, self._flush_event_batch)

    def _flush_event_batch(self) -> None:
        # Cleared first: an event buffered while this flush runs schedules the next one.
        self._event_flush_pending = False
        self._flush_events()


class BatchingDispatcher(EventDispatcher):  # type: ignore[misc]
    """Celery's dispatcher with ``EVENT_BUFFER_LIMIT`` as its default buffer limit."""

    def __init__(self, *args: Any, buffer_limit: int = EVENT_BUFFER_LIMIT, **kwargs: Any) -> None:
        super().__init__(*args, buffer_limit=buffer_limit, **kwargs)


class WorkerEvents(Events):  # type: ignore[misc]
    """The worker app's ``app.events``: its dispatchers are ``BatchingDispatcher``."""

    dispatcher_cls = "workers.lifecycle.consumer:BatchingDispatcher"
