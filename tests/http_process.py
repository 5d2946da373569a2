"""A server process the test starts, serving HTTP, until the test is done: the wait until it
answers and the stop, shared by the tests that run a real MCP server (toolhub's own, a
reference server) on a free port."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

UP_WITHIN_S = 60.0


@contextmanager
def serving(
    argv: list[str],
    url: str,
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    ready: Callable[[httpx.Response], bool] = lambda _: True,
) -> Iterator[str]:
    """``argv`` running until ``url`` answers (and ``ready`` accepts the answer); ``url``.
    Stopped with SIGTERM afterwards (SIGKILL if it lingers 30 s)."""
    proc = subprocess.Popen(
        argv,
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + UP_WITHIN_S
        while True:
            assert proc.poll() is None, f"{argv[0]} exited: {proc.communicate()[1][-2000:]}"
            try:
                if ready(httpx.get(url, timeout=1)):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{url} not up"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
