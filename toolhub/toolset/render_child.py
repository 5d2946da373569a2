"""The template render process, run as a script by ``render_process.py`` (never imported).

It loads only the sandbox module named on its command line, by path: importing the toolhub
package would start every tool (about a second) for nothing. It caps its own address space
(where the system allows; ``preexec_fn`` would not be safe in a threaded parent), says it is
ready, then answers each JSON request line — ``{"template": ..., "context": ...}`` — with one
JSON line, ``{"text": ...}`` or ``{"error": ...}``. Before each render it sets its CPU-time
limit a few seconds ahead, so that a render orphaned by a parent that died is still stopped by
the kernel rather than spinning forever; core dumps are off, so that stop leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import resource
import sys
from types import ModuleType
from typing import Any, BinaryIO

#: CPU seconds a render may use before the kernel stops the process (the parent's wall-clock
#: budget is far shorter; this only matters when no parent is left to enforce it).
CPU_MARGIN_S = 10


def main(argv: list[str]) -> None:
    limits = _load(argv[1])
    _limit(resource.RLIMIT_AS, int(argv[2]))
    _limit(resource.RLIMIT_CORE, 0)
    out = sys.stdout.buffer
    _answer(out, {"ready": True})
    for line in sys.stdin.buffer:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _limit(resource.RLIMIT_CPU, int(usage.ru_utime + usage.ru_stime) + CPU_MARGIN_S)
        request = json.loads(line)
        try:
            reply = {"text": limits.render_text(request["template"], request["context"])}
        except limits.TemplateFailure as exc:
            reply = {"error": str(exc)}
        _answer(out, reply)


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("template_limits", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _limit(which: int, soft: int) -> None:
    """Set a soft limit under the hard one, which stays (so the CPU limit can move ahead)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    with contextlib.suppress(OSError, ValueError):  # not enforceable (macOS and RLIMIT_AS)
        resource.setrlimit(which, (soft, hard))


def _answer(out: BinaryIO, reply: dict[str, Any]) -> None:
    out.write(json.dumps(reply).encode() + b"\n")
    out.flush()


if __name__ == "__main__":
    main(sys.argv)
