"""The worker's Celery consumer, with task events published in batches.

Celery buffers task events (``task-received``, ``task-started``, ``task-succeeded`` …) and asks
the consumer to flush them; the stock consumer flushes at once, so every event of every call
costs a wake-up of the consumer's event loop and a ``PUBLISH`` on the thread that also
receives the messages (measured: about a third of that thread's time with no-op calls). This
consumer flushes at most every ``EVENT_FLUSH_SECONDS`` (and Celery itself flushes whenever 24
events are waiting), as one ``task.multi`` message: the event batch Celery's receivers — Flower
among them — already understand. Events are unchanged, in order, and at most that much later;
the batch still waiting at shutdown is flushed by Celery's ``Events`` step when it closes.
"""

from __future__ import annotations

from celery.worker.consumer import Consumer as CeleryConsumer

#: How late a task event may reach Flower; each flush is one publish for all buffered events.
EVENT_FLUSH_SECONDS = 0.05


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
