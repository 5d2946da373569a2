"""Finding a test command's processes from outside: ``sleep`` processes whose argument carries
a tag, so a test can tell that a command (and what it started) is still alive or gone."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

import psutil


def tagged_sleeps(tag: str) -> list[psutil.Process]:
    """Live (non-zombie) ``sleep`` processes whose command line contains ``tag``."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.info["name"] == "sleep" and tag in cmdline and proc.info["status"] != "zombie":
            found.append(proc)
    return found


def seconds_until(check: Callable[[], object], timeout: float) -> float:
    """How long until ``check()`` is true; AssertionError when not within ``timeout``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not within {timeout}s")
        time.sleep(0.02)
    return time.monotonic() - started


#: How long a test waits for a killed host's commands to be gone. Left alone, the tagged sleeps
#: would run for days, so a bound this generous still tells, and a busy machine cannot fail it.
GONE_WITHIN_S = 15.0


def seconds_until_gone_after_kill(host_argv: list[str], tag: str) -> float:
    """Start ``host_argv`` (a process that starts a command running two ``sleep``s tagged
    ``tag``, then prints ``started``), SIGKILL it once both sleeps run, as a worker is killed,
    and return how long until neither is left (AssertionError after ``GONE_WITHIN_S``)."""
    proc = subprocess.Popen(host_argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    seconds_until(lambda: len(tagged_sleeps(tag)) == 2, GONE_WITHIN_S)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return seconds_until(lambda: not tagged_sleeps(tag), GONE_WITHIN_S)
