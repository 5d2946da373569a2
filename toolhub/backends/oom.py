"""Whom the kernel's OOM killer takes first: a command, never a toolhub process.

The threat: when a host (or a container's memory cgroup) runs out of memory, the kernel kills
the process with the highest ``oom_score``, and a worker holding many calls can outscore the
command that filled the memory: every call on it is lost, and a gateway or holder kill loses
every client's connection. Each command raises its own ``oom_score_adj`` to
``COMMAND_OOM_SCORE_ADJ`` before it execs (raising it is always allowed), so a command goes
first; toolhub's own long-lived processes (worker, gateway, holder, and everything the local
stack starts, Flower and Redis included, which inherit the stack's value) lower theirs to
``PROTECTED_OOM_SCORE_ADJ`` where they may (``CAP_SYS_RESOURCE``, which root usually has);
where they may not they keep 0, and say so once in the log.

A child inherits its parent's value, so a command of a protected worker would be protected
too without its prelude: the prelude is what gives it the high value.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

logger = logging.getLogger("toolhub.kernel")

#: A command's value: the kernel's highest, so it is taken before anything else of the host.
COMMAND_OOM_SCORE_ADJ = 1000
#: toolhub's own processes: low, not -1000 (which would exempt them entirely even when a
#: toolhub process itself is what leaks).
PROTECTED_OOM_SCORE_ADJ = -900

_warned = False


def oom_prelude() -> str:
    """Shell that raises the shell's own value (and so its command's) to the command value."""
    return f"echo {COMMAND_OOM_SCORE_ADJ} > /proc/self/oom_score_adj 2>/dev/null"


def set_oom_score_adj(value: int, pid: int | str = "self") -> bool:
    """Write ``value`` to ``pid``'s ``oom_score_adj``; False when the kernel refuses."""
    try:
        Path(f"/proc/{pid}/oom_score_adj").write_text(str(value))
    except OSError:
        return False
    return True


def oom_score_adj(pid: int | str = "self") -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(Path(f"/proc/{pid}/oom_score_adj").read_text())
    return None


def protect(what: str, pid: int | str = "self") -> bool:
    """Give a toolhub process (``what`` names it in the log) the protective value; where this
    process may not lower it, keep it and log that once per process."""
    global _warned
    if set_oom_score_adj(PROTECTED_OOM_SCORE_ADJ, pid):
        return True
    if not _warned:
        _warned = True
        logger.warning(
            "%s keeps oom_score_adj %s: lowering it needs CAP_SYS_RESOURCE (root without it "
            "cannot either); commands still raise theirs to %d, so the OOM killer takes them "
            "first",
            what,
            oom_score_adj(pid),
            COMMAND_OOM_SCORE_ADJ,
        )
    return False
