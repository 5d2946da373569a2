"""Client templates render in a separate process, under a wall-clock budget nothing can hold up.

A description override comes from the client. The sandbox's limits (``toolhub/core/
template_limits.py``) refuse the known bombs before they compute, but they cannot bound time:
loops may nest without printing anything, and one operation in C (a huge multiplication, a giant
``join``) holds the GIL until it is done, so no thread, timer or signal handler of the same
process can stop it — and while it runs the gateway's event loop, ``/healthz`` included, is
frozen. So a client template renders in a render process instead:

* a few (``PROCESSES``) long-lived children, started on first use (about a tenth of a second:
  they load the sandbox module alone) and reused; one request and one answer per JSON line over
  their pipes, never pickle;
* started with ``subprocess`` (fork and exec at once, safe in a threaded server, unlike a bare
  fork), with ``python -I``, an empty environment (no secrets) and ``/`` as working directory;
* each capped at ``MEMORY_LIMIT`` bytes of address space, so a memory bomb ends in a
  ``MemoryError`` there;
* ``RENDER_BUDGET_S`` of wall-clock time per template, waited for in ``select()`` (the GIL is
  free meanwhile); past it the process is killed, and the next render starts a fresh one.

Why not an AST pre-check instead: the costly shapes are too many to list statically (loops over
computed sequences, filters, macros), and a check that misses one freezes the gateway, while a
kill misses nothing. Templates written in code (built-in descriptions) are trusted and keep
rendering in-process, at no extra cost; so does an override without ``${{``/``${%`` markers.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolhub.core import TemplateRenderError, template_limits
from toolhub.core.templates import has_markers

logger = logging.getLogger("toolhub.templates")

#: Wall-clock seconds one client template may take (far more than a real description needs).
RENDER_BUDGET_S = 1.0
#: Address space of a render process (it needs about 25 MiB).
MEMORY_LIMIT = 256 * 1024 * 1024
#: Render processes at most, so a few slow templates do not queue every other one.
PROCESSES = 2
#: Seconds a new render process may take to say it is ready.
START_TIMEOUT_S = 10.0

_CHILD = Path(__file__).with_name("render_child.py")


class _Stuck(Exception):
    """The render process did not answer within the budget."""


class _Child:
    """One render process and its non-blocking pipes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(_CHILD), template_limits.__file__, str(MEMORY_LIMIT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd="/",
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.to_child = self.proc.stdin.fileno()
        self.from_child = self.proc.stdout.fileno()
        os.set_blocking(self.to_child, False)
        os.set_blocking(self.from_child, False)
        try:
            ready = json.loads(self.exchange(b"", time.monotonic() + START_TIMEOUT_S))
        except (_Stuck, EOFError, OSError, ValueError) as exc:
            self.kill()
            raise RuntimeError(f"the template render process did not start: {exc!r}") from None
        if ready != {"ready": True}:
            self.kill()
            raise RuntimeError(f"the template render process said {ready!r}, not ready")

    def exchange(self, request: bytes, deadline: float) -> bytes:
        """Send ``request`` (if any) and read one answer line, all before ``deadline``."""
        pending = memoryview(request)
        received: list[bytes] = []
        with selectors.DefaultSelector() as selector:
            selector.register(self.from_child, selectors.EVENT_READ)
            if pending:
                selector.register(self.to_child, selectors.EVENT_WRITE)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Stuck()
                for key, _ in selector.select(remaining):
                    if key.fd == self.to_child:
                        pending = pending[os.write(self.to_child, pending) :]
                        if not pending:
                            selector.unregister(self.to_child)
                        continue
                    data = os.read(self.from_child, 1 << 16)
                    if not data:
                        raise EOFError("the render process closed its pipe")
                    received.append(data)
                    if data.endswith(b"\n"):
                        return b"".join(received)

    def ended(self) -> str:
        """How the (reaped) process ended."""
        status = self.proc.returncode
        if status >= 0:
            return f"exit status {status}"
        try:
            return f"signal {signal.Signals(-status).name}"
        except ValueError:  # a signal Python has no name for
            return f"signal {-status}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


class RenderPool:
    """Renders client templates in up to ``processes`` render processes at once; a render takes
    an idle one or starts one, and gives it back unless it had to be killed."""

    def __init__(self, processes: int = PROCESSES, budget_s: float = RENDER_BUDGET_S) -> None:
        self.processes = processes
        self.budget_s = budget_s
        self._reset()
        reset = weakref.WeakMethod(self._reset)
        os.register_at_fork(after_in_child=lambda: _call(reset))

    def _reset(self) -> None:
        """A fresh, empty pool. After a fork (a Celery worker) the render processes, lock and
        semaphore are the parent's: sharing its pipes would mix two processes' answers."""
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.processes)
        self._idle: list[_Child] = []

    def render(self, text: str, context: Mapping[str, Any]) -> str:
        """``text`` rendered against ``context`` (JSON values); ``TemplateRenderError`` for any
        failure of the template, including running out of time or memory."""
        try:
            if not has_markers(text):
                template_limits.check_output_size(text)
                return text
            template_limits.check_template_size(text)
        except template_limits.TemplateFailure as exc:
            raise TemplateRenderError(str(exc)) from None
        request = _request(text, context)
        with self._slots:
            answer = self._exchange(request)
        reply = json.loads(answer)
        if "error" in reply:
            raise TemplateRenderError(reply["error"])
        return str(reply["text"])

    def close(self) -> None:
        """Stop the idle render processes (one still rendering stops when its render ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()

    def _exchange(self, request: bytes) -> bytes:
        """One request and its answer. An idle process found dead (an OOM killer, an operator)
        is replaced once, so that only a template's own failure is reported as the template's."""
        with self._lock:
            child = self._idle.pop() if self._idle else None
        retry = child is not None
        while True:
            child = child if child is not None else _Child()
            try:
                answer = child.exchange(request, time.monotonic() + self.budget_s)
            except _Stuck:
                child.kill()
                logger.warning(
                    "a client template ran past %g s; render process killed", self.budget_s
                )
                raise TemplateRenderError(
                    f"template could not be rendered: it took longer than {self.budget_s:g} s"
                ) from None
            except (EOFError, OSError):
                child.kill()
                if retry:
                    child, retry = None, False
                    continue
                raise TemplateRenderError(
                    f"template could not be rendered: the render process stopped ({child.ended()})"
                ) from None
            with self._lock:
                self._idle.append(child)
            return answer


def _call(method: weakref.WeakMethod[Any]) -> None:
    bound = method()
    if bound is not None:
        bound()


def _request(text: str, context: Mapping[str, Any]) -> bytes:
    try:
        body = json.dumps({"template": text, "context": dict(context)}, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TemplateRenderError(
            f"template could not be rendered: its variables are not JSON ({exc})"
        ) from None
    return body.encode() + b"\n"


_POOL = RenderPool()
atexit.register(_POOL.close)


def render_client_template(text: str, context: Mapping[str, Any]) -> str:
    """Render a template that came from a client, in the process-wide pool."""
    return _POOL.render(text, context)
