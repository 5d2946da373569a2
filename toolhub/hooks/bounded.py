"""One hook as toolhub runs it: within its time bound, its failures typed, never raised.

A hook is the operator's code or the operator's web service, but it can still raise, hang or
answer nonsense; none of that may reach a client as a traceback or hold a call forever. Each
call of a hook runs on a small shared thread pool and is waited for at most its
``timeout_seconds``; a hook still running then is abandoned to its thread (Python cannot stop
it) and counted as failed. Every failure becomes ``HookFailed`` with a short reason: the
caller (``before.py``, ``after.py``) turns it into a typed error or skips the hook, as the
hook's ``on_error`` says. The shipped hooks run inline: they are toolhub's own code, bounded
by construction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

from toolhub.redaction import redact_secrets
from toolhub.tenancy.hook_policy import HookGrant

from .api import AfterItem, BeforeCall, Decision

logger = logging.getLogger("toolhub.hooks")

T = TypeVar("T")

#: Threads that run hooks (a hung hook holds one until it returns).
POOL_THREADS = 16
_pool = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="toolhub-hook")


class HookFailed(Exception):
    """A hook raised, hung past its timeout, or answered something that is not an answer."""

    def __init__(self, hook: str, reason: str) -> None:
        super().__init__(f"hook `{hook}` failed: {reason}")
        self.hook = hook
        self.reason = reason


@dataclass(frozen=True, slots=True)
class BoundHook:
    """A resolved hook: its name, how it runs, and its stages (None: it has no such stage)."""

    name: str
    grant: HookGrant
    before: Callable[[BeforeCall], Decision | None] | None
    after: Callable[[AfterItem], AfterItem | None] | None
    inline: bool = False

    @property
    def fails_open(self) -> bool:
        return self.grant.on_error == "fail_open"

    def run(self, stage: Callable[[T], Any], value: T) -> Any:
        """``stage(value)`` within the hook's time bound; ``HookFailed`` on any failure."""
        if self.inline:
            try:
                return stage(value)
            except Exception as exc:
                raise self._failed(exc) from None
        future = _pool.submit(stage, value)
        try:
            return future.result(timeout=self.grant.timeout_seconds)
        except FutureTimeout:
            future.cancel()
            raise HookFailed(
                self.name, f"no answer within {self.grant.timeout_seconds:g} s"
            ) from None
        except Exception as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: Exception) -> HookFailed:
        if isinstance(exc, HookFailed):
            return exc
        # The exception's text may quote what the hook saw: masked before it is logged.
        text = redact_secrets(str(exc))[:200]
        return HookFailed(
            self.name, f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        )

    def skipped(self, failure: HookFailed) -> None:
        """Log a fail-open hook's failure (the call goes on without it)."""
        logger.warning("%s; skipped (fail_open)", failure)
