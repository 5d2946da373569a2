"""The ``*** Begin Patch`` format of Codex's ``apply_patch``: parsing, and applying hunks to text.

Pure functions on strings; the tool (``codex.py``) does the file system part. A hunk is found by
its context and removed lines, first exactly, then ignoring trailing whitespace, then ignoring
surrounding whitespace (models get indentation and trailing blanks wrong more than anything else).
A ``@@ header`` line, when given, is found first and narrows the search to what follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
EOF_MARK = "*** End of File"


class PatchError(ValueError):
    """The patch text is malformed (the caller's mistake)."""


class HunkError(ValueError):
    """A well-formed hunk that does not fit the file it targets."""


@dataclass(slots=True)
class Hunk:
    header: str = ""
    lines: list[tuple[str, str]] = field(default_factory=list)
    """``(tag, text)`` with tag ``" "`` (context), ``"-"`` (removed) or ``"+"`` (added)."""
    at_eof: bool = False

    @property
    def old(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "+"]

    def replacement(self, matched: list[str]) -> list[str]:
        """The new lines, with context lines taken from the file as matched (so a fuzzy match
        never rewrites the whitespace of lines the patch did not mean to change)."""
        out: list[str] = []
        old = iter(matched)
        for tag, text in self.lines:
            if tag == "+":
                out.append(text)
                continue
            actual = next(old)
            if tag == " ":
                out.append(actual)
        return out


@dataclass(slots=True)
class FileOp:
    action: Literal["add", "delete", "update"]
    path: str
    move_to: str | None = None
    content: str = ""
    hunks: list[Hunk] = field(default_factory=list)


def parse(text: str) -> list[FileOp]:
    lines = _strip_wrapping(text.strip().splitlines())
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"the patch must start with `{BEGIN}`")
    if lines[-1].strip() != END:
        raise PatchError(f"the patch must end with `{END}`")
    ops: list[FileOp] = []
    i = 1
    body = lines[:-1]
    while i < len(body):
        line = body[i]
        if line.startswith(ADD):
            op = FileOp("add", _path(line, ADD))
            i += 1
            added: list[str] = []
            while i < len(body) and body[i].startswith("+"):
                added.append(body[i][1:])
                i += 1
            op.content = "\n".join(added) + ("\n" if added else "")
            ops.append(op)
        elif line.startswith(DELETE):
            ops.append(FileOp("delete", _path(line, DELETE)))
            i += 1
        elif line.startswith(UPDATE):
            op = FileOp("update", _path(line, UPDATE))
            i += 1
            if i < len(body) and body[i].startswith(MOVE):
                op.move_to = _path(body[i], MOVE)
                i += 1
            i = _hunks(body, i, op)
            if not op.hunks and op.move_to is None:
                raise PatchError(f"`{UPDATE}{op.path}` has no hunks")
            ops.append(op)
        elif not line.strip():
            i += 1
        else:
            raise PatchError(f"line {i + 1}: expected a file header, got {line[:80]!r}")
    if not ops:
        raise PatchError("the patch changes no files")
    return ops


def _strip_wrapping(lines: list[str]) -> list[str]:
    """Tolerate a heredoc (`apply_patch <<'EOF'` ... `EOF`) or a code fence around the patch."""
    if lines and (lines[0].startswith("```") or "<<" in lines[0]) and len(lines) > 2:
        lines = lines[1:-1] if not lines[-1].startswith(END) else lines[1:]
    return lines


def _path(line: str, prefix: str) -> str:
    path = line[len(prefix) :].strip()
    if not path:
        raise PatchError(f"`{prefix.strip()}` without a path")
    return path


def _hunks(body: list[str], i: int, op: FileOp) -> int:
    hunk: Hunk | None = None
    while i < len(body):
        line = body[i]
        if line.startswith("*** ") and line.strip() != EOF_MARK:
            break
        if line.strip() == EOF_MARK:
            if hunk is None:
                raise PatchError(f"`{EOF_MARK}` outside a hunk")
            hunk.at_eof = True
        elif line.startswith("@@"):
            hunk = Hunk(header=line[2:].strip().removesuffix("@@").strip())
            op.hunks.append(hunk)
        else:
            if hunk is None:
                hunk = Hunk()
                op.hunks.append(hunk)
            tag, rest = (line[:1], line[1:]) if line else (" ", "")
            if tag in (" ", "-", "+"):
                hunk.lines.append((tag, rest))
            else:
                raise PatchError(
                    f"line {i + 1}: hunk lines start with ' ', '-' or '+', got {line[:80]!r}"
                )
        i += 1
    return i


def apply_hunks(text: str, hunks: list[Hunk], path: str) -> str:
    """``text`` with every hunk applied, or ``HunkError`` naming the first that does not fit."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    edits: list[tuple[int, int, list[str]]] = []
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        if hunk.header:
            found = _seek(lines, [hunk.header], cursor, eof=False)
            if found is None:
                raise HunkError(f"{path}: hunk {number}: context `@@ {hunk.header}` not found")
            cursor = found + 1
        old = hunk.old
        if not old:
            at = len(lines) if hunk.at_eof or not hunk.header else cursor
            edits.append((at, 0, hunk.replacement([])))
            continue
        found = _seek(lines, old, cursor, eof=hunk.at_eof)
        if found is None:
            shown = "\n".join(old[:6])
            raise HunkError(f"{path}: hunk {number}: these lines were not found:\n{shown}")
        edits.append((found, len(old), hunk.replacement(lines[found : found + len(old)])))
        cursor = found + len(old)
    for start, length, new in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[start : start + length] = new
    return "\n".join(lines) + "\n" if lines else ""


_MATCHERS: tuple[Callable[[str], str], ...] = (
    lambda s: s,
    lambda s: s.rstrip(),
    lambda s: s.strip(),
)


def _seek(lines: list[str], wanted: list[str], start: int, *, eof: bool) -> int | None:
    """Index where ``wanted`` occurs at or after ``start`` (at the very end when ``eof``)."""
    n = len(wanted)
    if n > len(lines):
        return None
    for norm in _MATCHERS:
        target = [norm(w) for w in wanted]
        starts = [len(lines) - n] if eof else range(start, len(lines) - n + 1)
        for at in starts:
            if at >= 0 and all(norm(lines[at + k]) == target[k] for k in range(n)):
                return at
    return None
