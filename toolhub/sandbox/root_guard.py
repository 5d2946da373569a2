"""No commands for remote clients as root, unless the operator says so.

Threat: a process that runs model-written commands (a worker, the embedded gateway) started as
root runs them as uid 0. Dropping capabilities does not make uid 0 harmless: files are checked
by their mode, so a capability-less uid-0 command can still write ``kernel.core_pattern`` (a
command the kernel runs as root on the next crash), raw devices, and read ``/etc/shadow``. The
sandbox covers the ones it knows of (``/proc/sys`` and ``/sys`` read-only, the host's password
hashes hidden), but the honest default is not to be root at all: such a process refuses to
start as euid 0 unless ``TOOLHUB_ALLOW_ROOT=1`` (a container whose only user is root, a test
machine). docs/sandbox.md, "Root".
"""

from __future__ import annotations

import os

from toolhub.errors import ErrorCode, ToolhubError

ALLOW_ROOT_ENV = "TOOLHUB_ALLOW_ROOT"


class RootRefused(ToolhubError):
    """Started as root without ``TOOLHUB_ALLOW_ROOT=1``."""

    code = ErrorCode.ROOT_REFUSED


def root_allowed() -> bool:
    return os.environ.get(ALLOW_ROOT_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def refuse_root(process: str) -> None:
    """Raise ``RootRefused`` (one line: what and why) when this process runs as euid 0 and
    the operator has not allowed it."""
    if os.geteuid() != 0 or root_allowed():
        return
    raise RootRefused(
        f"refusing to start {process} as root: the commands it runs for clients would run as "
        f"uid 0; run it as an unprivileged user, or set {ALLOW_ROOT_ENV}=1 to allow root"
    )
