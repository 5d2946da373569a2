"""``.gitignore`` rules for directory walks that do not go through ripgrep (``list_dir``).

Rules are read per directory as the walk descends, like git does: a ``.gitignore`` applies to
its own directory and below, with paths relative to it. ``.git`` itself is always skipped.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

ALWAYS_SKIPPED = frozenset({".git"})


@dataclass(frozen=True, slots=True)
class _Rules:
    base: Path
    spec: GitIgnoreSpec


class IgnoreRules:
    """The ``.gitignore`` rules in force at one directory (immutable; ``descend`` for a child)."""

    __slots__ = ("_rules",)

    def __init__(self, rules: tuple[_Rules, ...] = ()) -> None:
        self._rules = rules

    @classmethod
    def for_directory(cls, root: Path, directory: Path) -> IgnoreRules:
        """The rules that apply inside ``directory``: every ``.gitignore`` from ``root`` down."""
        rules = cls()
        chain = [directory, *directory.parents]
        for folder in reversed([d for d in chain if d == root or root in d.parents]):
            rules = rules.descend(folder)
        return rules

    def descend(self, directory: Path) -> IgnoreRules:
        """The rules for ``directory``: these plus its own ``.gitignore`` if it has one."""
        lines = _read_ignore_file(directory / ".gitignore")
        if lines is None:
            return self
        spec = GitIgnoreSpec.from_lines(lines)
        return IgnoreRules((*self._rules, _Rules(directory, spec)))

    def ignored(self, path: Path, *, is_dir: bool) -> bool:
        if path.name in ALWAYS_SKIPPED:
            return True
        verdict = False
        for rules in self._rules:
            try:
                rel = path.relative_to(rules.base).as_posix()
            except ValueError:
                continue
            result = rules.spec.check_file(rel + "/" if is_dir else rel)
            if result.include is not None:
                verdict = result.include
        return verdict


#: A ``.gitignore`` larger than this is not one a person wrote; read no further.
MAX_IGNORE_BYTES = 1 << 20


def _read_ignore_file(path: Path) -> list[str] | None:
    """The lines of ``path`` when it is a regular file; never blocks on a FIFO or a device
    planted under that name, and never follows a symlink out of the workspace."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_IGNORE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode(errors="replace").splitlines()
