"""Container probe for toolhub workers: ``python -m workers.lifecycle.healthcheck``.

Exit 0 when the heartbeat file written by :func:`workers.lifecycle.heartbeat.beat` exists and is
younger than ``--max-age`` seconds; with ``--ready`` its content must also be ``ready``.
Exit 1 otherwise, with the reason on stderr (Kubernetes shows it in the pod's events).

Why not ``celery inspect ping``: see :mod:`workers.lifecycle.heartbeat`. This module imports
only the standard library (and the equally small ``workers.lifecycle.heartbeat``) so that a
probe costs a bare interpreter start, whatever the worker is busy with.

Usage::

    python -m workers.lifecycle.healthcheck [--file PATH] [--max-age SECONDS] [--ready]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from workers.lifecycle.heartbeat import default_path

#: Heartbeat content that means "connected to the broker and consuming".
READY_STATE = "ready"
#: The content is a single short word; never read more than this from the file.
_MAX_READ = 64


def check(path: str, max_age: float, require_ready: bool, now: float | None = None) -> str | None:
    """Return ``None`` when healthy, else a one-line reason why not.

    Kept separate from :func:`main` so tests can call it without spawning processes.
    """
    try:
        mtime = os.stat(path).st_mtime
    except FileNotFoundError:
        return f"heartbeat file {path} does not exist (worker not started or not beating)"
    except OSError as exc:
        return f"cannot stat heartbeat file {path}: {exc}"
    age = (time.time() if now is None else now) - mtime
    if age > max_age:
        return f"heartbeat file {path} is stale: {age:.1f}s old > max age {max_age:g}s"
    if require_ready:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                state = handle.read(_MAX_READ).strip()
        except OSError as exc:
            return f"cannot read heartbeat file {path}: {exc}"
        if state != READY_STATE:
            return f"worker not ready: heartbeat state is {state!r}, expected {READY_STATE!r}"
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workers.lifecycle.healthcheck",
        description="Exit 0 if the toolhub worker heartbeat file is fresh (and ready).",
    )
    parser.add_argument(
        "--file",
        default=None,
        help="heartbeat file (default: $TOOLHUB_HEARTBEAT_FILE or /tmp/toolhub-worker.heartbeat)",
    )
    parser.add_argument(
        "--max-age",
        type=float,
        default=60.0,
        help="maximum age of the heartbeat in seconds (default: 60)",
    )
    parser.add_argument(
        "--ready",
        action="store_true",
        help="also require the worker to have reported 'ready' (connected to the broker)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the probe; return the process exit code (0 healthy, 1 unhealthy)."""
    args = _parser().parse_args(argv)
    if args.max_age <= 0:
        print("--max-age must be positive", file=sys.stderr)
        return 1
    reason = check(args.file or default_path(), args.max_age, args.ready)
    if reason is not None:
        print(f"unhealthy: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
