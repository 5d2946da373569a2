"""Records of calls refused before they ran (an unknown tool, arguments that fail validation).

Such a call never reaches an executor, so no executor keeps its record; without one a client
that looks its id up (``GET …/calls/{id}``, ``Session.record``) would get "unknown" for a call
it was just answered about. The dispatcher that refused it keeps its record here: bounded (the
newest ``MAX_REFUSED``), in this process only, in the shape of an executor's record with
``status: failed`` and ``attempt: 0`` (nothing ran).

Threat: a client can refuse itself as many calls as it likes; the bound keeps that memory flat.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from toolhub.core import CallResult

__all__ = ["MAX_REFUSED", "RefusedCalls"]

MAX_REFUSED = 1_000


class RefusedCalls:
    def __init__(self, session_id: str, limit: int = MAX_REFUSED) -> None:
        self.session_id = session_id
        self.limit = limit
        self._records: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, name: str, result: CallResult) -> None:
        """Keep the record of the refused call ``result`` answers (by its ``call_id``)."""
        if not result.call_id:
            return
        now = time.time()
        record = {
            "call_id": result.call_id,
            "session_id": self.session_id,
            "tool": None,
            "name": name,
            "status": "failed",
            "attempt": 0,
            "started_at": now,
            "finished_at": now,
            "result": result.to_dict(),
        }
        with self._lock:
            self._records[result.call_id] = record
            self._records.move_to_end(result.call_id)
            while len(self._records) > self.limit:
                self._records.popitem(last=False)

    def record(self, call_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._records.get(call_id)
        return dict(found) if found is not None else None
