"""The real ``curl`` binary as a client of toolhub's HTTP faces (issue 39: every client gets the
same truth): each request is one ``curl`` process with the flags a person would type, its
answer read back from what curl printed (``-i``: the status line, the headers, the body).

The suites that use it skip with a reason when the machine has no ``curl``; nothing here stands
in for it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

CURL = shutil.which("curl")
#: For a module whose every test drives curl.
needs_curl = pytest.mark.skipif(CURL is None, reason="the curl binary is not on PATH")
#: A generous bound per request: the machine may be busy.
MAX_TIME_S = 60
JSON = "Content-Type: application/json"
BOTH = "Accept: application/json, text/event-stream"


@dataclass(frozen=True)
class Answer:
    """What curl printed for one request."""

    status: int
    headers: dict[str, str]  # lower-case names; the last of a repeated header
    body: str

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def media(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()


def curl(*args: str) -> Answer:
    """``curl -sS -i ARGS``: the answer, or an assertion naming curl's own complaint."""
    assert CURL is not None
    done = subprocess.run(
        [CURL, "-sS", "-i", "--max-time", str(MAX_TIME_S), *args],
        capture_output=True,
        timeout=MAX_TIME_S + 30,
    )
    assert done.returncode == 0, (done.returncode, done.stderr.decode(errors="replace"))
    return parse(done.stdout.decode())


def parse(printed: str) -> Answer:
    """Split ``curl -i`` output into status, headers and body (a ``100 Continue`` skipped)."""
    head, _, body = printed.partition("\r\n\r\n")
    while head.startswith("HTTP/") and " 100 " in head.split("\r\n", 1)[0]:
        head, _, body = body.partition("\r\n\r\n")
    lines = head.split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(status, headers, body)


@contextmanager
def streaming(*args: str) -> Iterator[subprocess.Popen[str]]:
    """``curl -sS -N ARGS`` left running, its stdout readable line by line as events arrive;
    killed if the test leaves it running."""
    assert CURL is not None
    proc = subprocess.Popen(
        [CURL, "-sS", "-N", "--max-time", str(MAX_TIME_S), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
