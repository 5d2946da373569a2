"""Exec wrapper of the Landlock fallback: ``python -I -S landlock_exec.py -- <argv...>``.

It drops every capability, confines itself as the JSON spec in ``TOOLHUB_LANDLOCK_SPEC`` says
(written by ``landlock.landlock_argv``; in the environment, not on the command line, which every
confined command can read), then replaces itself with ``argv`` in the spec's environment and
directory, so the command and all it starts inherit the restriction. It runs as a script
(``-I -S``: no site packages, no ``PYTHON*`` variables) and imports only
``landlock_syscalls.py`` beside it, not the ``toolhub`` package: it starts once per command.
If the kernel refuses, the command does not run (exit 126): never unconfined.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(args: list[str]) -> int:
    raw = os.environ.get("TOOLHUB_LANDLOCK_SPEC")
    if len(args) < 2 or args[0] != "--" or raw is None:
        sys.stderr.write("usage: TOOLHUB_LANDLOCK_SPEC=<spec> landlock_exec.py -- <argv...>\n")
        return 2
    spec, argv = json.loads(raw), args[1:]
    sys.path.insert(0, str(Path(__file__).parent))
    from landlock_syscalls import drop_capabilities, restrict_self

    try:
        os.chdir(spec["cwd"])
        drop_capabilities()
        restrict_self(
            [(p, r) for p, r in spec["grants"]],
            network=spec["network"],
            connect_port=spec.get("connect_port"),
            pinned={p: (dev, ino) for p, (dev, ino) in spec.get("pinned", {}).items()},
        )
    except OSError as exc:
        sys.stderr.write(f"toolhub sandbox: Landlock refused to confine the command: {exc}\n")
        return 126
    os.execvpe(argv[0], argv, spec["env"])
    return 127  # not reached: execvpe raises when it fails


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
