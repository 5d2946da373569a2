"""Where a program is installed: what a confined helper needs readable to start at all.

A sandboxed command reads only the system directories and the ``PATH`` prefixes
(``policy.SandboxPolicy.readable_roots``). A language server found next to the worker's own
interpreter (a virtualenv that is not on ``PATH``) lives outside both, and so does the base
Python a virtualenv points at. These are read-only additions for that one helper: its
installation prefix, its script interpreter's, and a virtualenv's base prefix.
"""

from __future__ import annotations

import os
from pathlib import Path

_BIN_DIRS = ("bin", "sbin", "Scripts")


def install_roots(program: str | Path) -> tuple[Path, ...]:
    """The prefixes ``program`` needs readable: its own (the parent of its ``bin``), the
    interpreter named by its ``#!`` line (not ``/usr/bin/env``), and for each of them that is
    a virtualenv, the base installation ``pyvenv.cfg`` names. Symlinks count both ways."""
    roots: list[Path] = []
    for path in (Path(program), *_interpreter(Path(program))):
        for candidate in dict.fromkeys((path, Path(os.path.realpath(path)))):
            prefix = _prefix(candidate)
            roots.append(prefix)
            roots.extend(_venv_base(prefix))
    return tuple(dict.fromkeys(roots))


def _prefix(path: Path) -> Path:
    parent = path.parent
    return parent.parent if parent.name in _BIN_DIRS and parent.parent != Path("/") else parent


def _interpreter(script: Path) -> list[Path]:
    try:
        with script.open("rb") as handle:
            first = handle.readline(256)
    except OSError:
        return []
    if not first.startswith(b"#!"):
        return []
    words = first[2:].decode(errors="replace").split()
    if not words or words[0].endswith("/env"):
        return []
    return [Path(words[0])]


def _venv_base(prefix: Path) -> list[Path]:
    try:
        lines = (prefix / "pyvenv.cfg").read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            home = Path(value.strip())
            return list(
                dict.fromkeys(
                    (_prefix(home / "python"), _prefix(Path(os.path.realpath(home / "python"))))
                )
            )
    return []
