"""What operators see of a worker: its log format (JSON lines with ``TOOLHUB_LOG_FORMAT=json``,
Celery's signal-handler notices included) and what Celery's remote inspection (Flower's worker
page) reveals of the calls it holds. (Its ``/metrics`` listener is a service of the worker
process: ``metrics.py``, ``process.py``.)

``install`` (called by ``boot.py``) only connects a Celery logging signal and replaces three
inspect commands, so importing the app (Flower and ``celery inspect`` do) starts nothing.

Why the inspect commands are replaced: Celery's ``active``, ``reserved`` and ``scheduled``
answer with each request's raw keyword arguments unless the caller asks for safe mode. Flower
asks ``active`` safely but ``reserved`` and ``scheduled`` raw whenever someone opens a worker,
and ``celery inspect`` asks raw, so the arguments the dispatcher redacted from the task events
would leak through the side door. The replacements always answer with the same redacted
``kwargsrepr`` the events carry (the real arguments only with ``TOOLHUB_SHOW_ARGUMENTS``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from celery.signals import after_setup_logger
from celery.worker.control import inspect_command
from celery.worker.request import Request

from toolhub.distributed.settings import Settings
from toolhub.fences.celery import active_requests, reserved_requests, route_signal_notices
from toolhub.logs import adopt_handlers, json_logs


def install(settings: Settings) -> None:
    """Hook logging into the worker's startup; redact remote inspection."""
    after_setup_logger.connect(_on_logging, weak=False)
    _redact_inspection(safe=not settings.show_arguments)
    if json_logs():
        route_signal_notices(_say_json)


def _say_json(msg: str, f: TextIO | None = sys.__stderr__) -> None:
    """Celery's signal handlers (warm shutdown, Ctrl-C, USR1 stack dumps) write notices
    straight to the terminal, past logging (whose locks a signal handler must not take).
    In JSON mode they become JSON lines, still written with one lock-free ``os.write``."""
    line = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "level": "WARNING",
        "logger": "celery.apps.worker",
        "message": msg,
    }
    os.write(f.fileno() if f is not None else 2, (json.dumps(line) + "\n").encode())


def _on_logging(logger: logging.Logger, **_: Any) -> None:
    adopt_handlers(logger)


def _redact_inspection(safe: bool) -> None:
    def active(state: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """List of tasks currently being executed."""
        return [r.info(safe=safe) for r in state.tset(active_requests())]

    def reserved(state: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """List of currently reserved tasks, not including scheduled/active."""
        waiting = state.tset(reserved_requests(for_inspection=True)) - state.tset(active_requests())
        return [r.info(safe=safe) for r in waiting]

    def scheduled(state: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """List of currently scheduled ETA/countdown tasks."""
        found = []
        for waiting in state.consumer.timer.schedule.queue:
            request = waiting.entry.args[0] if waiting.entry.args else None
            if isinstance(request, Request):
                eta = request.eta.isoformat() if request.eta else None
                found.append(
                    {"eta": eta, "priority": waiting.priority, "request": request.info(safe=safe)}
                )
        return found

    # Registered under Celery's own names and aliases: the last registration wins.
    inspect_command(alias="dump_active")(active)
    inspect_command(alias="dump_reserved")(reserved)
    inspect_command(alias="dump_schedule")(scheduled)
