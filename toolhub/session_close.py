"""Ending and closing a session: what ``Session.end`` and ``Session.close`` do.

Closing cancels every call the session still runs here (its command dies, its record says
``cancelled``) and releases what the session holds: the executor, attached MCP sources, the
state writer, every closeable resource in its container, and the loop thread of its sync twins,
which gets a moment to report how a cancelled call ended. Ending also ends the session
everywhere (no dispatcher reconnects to it) and removes its scratch files. ``SessionClose`` is
a mixin of ``Session``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from toolhub.backends.session_info import SessionInfo, remove_scratch

if TYPE_CHECKING:
    from toolhub.executors import Executor
    from toolhub.loop_thread import LoopThread
    from toolhub.sources.attach import AttachedSources
    from toolhub.state import DebouncedWriter
    from toolhub.toolset import ToolSet

#: How long ``close`` lets the calls it cancelled reach their cancelled result.
CLOSE_GRACE_SECONDS = 1.0

logger = logging.getLogger("toolhub.session")


class SessionClose:
    """End a session everywhere, or close it here."""

    if TYPE_CHECKING:
        toolset: ToolSet
        executor: Executor
        _closed: bool
        _sources: AttachedSources | None
        _writer: DebouncedWriter | None
        _loop: LoopThread | None

    def end(self) -> None:
        """End the session everywhere, then close it here. Distributed: no dispatcher can
        reconnect to it (``Session.connect`` with its id starts afresh) and workers take no
        new call of it; calls already running finish, and their records stay readable. The
        session's command logs and tmp here are removed (``remove_scratch``)."""
        self.executor.end()
        info = self.toolset.container.get(SessionInfo)
        self.close()
        if info is not None:
            remove_scratch(info.session_dir)

    def close(self) -> None:
        """Cancel every call still running for this session here (its command dies, its
        record says ``cancelled``), then release what the session holds."""
        if self._closed:
            return
        self._closed = True
        self.executor.close()
        if self._sources is not None:
            self._sources.close()
        if self._writer is not None:
            self._writer.close()
        for value in self.toolset.container.values():
            close = getattr(value, "close", None)
            if callable(close) and value is not self:
                try:
                    close()
                except Exception:
                    logger.exception("closing %r failed", value)
        if self._loop is not None:
            # A sync twin's call cancelled above gets a moment to say how it ended.
            self._loop.stop(grace=CLOSE_GRACE_SECONDS)
