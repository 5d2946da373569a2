"""Planning and applying anchored edits: every anchor is checked, then every edit applied, in
memory and against one snapshot of the file, so a call either writes all its edits or none.

An edit is ``replace`` (lines ``anchor``..``end_anchor`` become ``content``), ``insert_after``
(``content`` goes after ``anchor``; ``0`` is the top of the file, ``EOF`` the end) or
``delete`` (lines ``anchor``..``end_anchor`` go). Edits of one call may not touch the same line
twice: their order would then decide the result, and the model cannot see that order in the
file it read. Stale anchors are all reported at once, with the file's current lines around
each, so one retry can fix them all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, Field

from toolhub.core import ToolError

from .hashline_scheme import Anchor, FileLines, Hasher, parse_anchor

CONTEXT_LINES = 2
MAX_SNIPPET_LINES = 400


class LineEdit(BaseModel):
    op: Literal["replace", "insert_after", "delete"] = Field(
        description="`replace` lines `anchor`..`end_anchor` with `content`; `insert_after` "
        "`anchor` the lines of `content`; `delete` lines `anchor`..`end_anchor`."
    )
    anchor: str = Field(
        description="`N:hash` of the first line to replace or delete, or of the line to insert "
        "after (`0`: the top of the file, `EOF`: after the last line)."
    )
    end_anchor: str | None = Field(
        None, description="`N:hash` of the last line of the range; omitted: the anchor's line."
    )
    content: str | None = Field(
        None,
        description="The new lines, separated by newlines (one final newline is ignored). For "
        "`replace`, empty content removes the lines.",
    )


@dataclass(frozen=True, slots=True)
class Stale:
    """An anchor whose line no longer has the hash the model quoted."""

    where: str
    anchor: str
    line: int
    current: str | None
    """``N:hash|text`` of the line now, or None when the file has no such line any more."""


@dataclass(frozen=True, slots=True)
class ParsedEdit:
    index: int
    op: str
    first: Anchor
    last: Anchor | None
    new: list[bytes]


@dataclass(frozen=True, slots=True)
class Splice:
    """Lines ``start``..``stop`` (0-based, ``stop`` exclusive) become ``new``."""

    index: int
    start: int
    stop: int
    new: list[bytes]
    anchored: int | None = None
    """For an insert: the line it is anchored to (None for ``EOF``)."""


@dataclass(frozen=True, slots=True)
class Applied:
    lines: FileLines
    regions: list[tuple[int, int]]
    """Each edit's new lines in the result: (0-based first line, number of lines)."""


def parse_edits(edits: list[LineEdit], hash_len: int, field: str) -> list[ParsedEdit]:
    """Every edit checked for shape before the file is read: a malformed call costs no I/O."""
    out: list[ParsedEdit] = []
    for i, edit in enumerate(edits):
        where = f"{field}[{i}]"
        edges = edit.op == "insert_after"
        first = parse_anchor(edit.anchor, hash_len, f"{where}.anchor", edges=edges)
        last = None
        if edit.end_anchor is not None:
            if edges:
                raise ToolError.invalid_arguments(
                    f"{where}: insert_after takes no `end_anchor`; it inserts after one line"
                )
            last = parse_anchor(edit.end_anchor, hash_len, f"{where}.end_anchor", edges=False)
            if last.line < first.line:
                raise ToolError.invalid_arguments(
                    f"{where}: the range runs backwards: `end_anchor` (line {last.line}) is "
                    f"before `anchor` (line {first.line})"
                )
        if edit.op == "delete":
            if edit.content:
                raise ToolError.invalid_arguments(
                    f"{where}: delete takes no `content`; use replace to put new lines in place"
                )
            new: list[bytes] = []
        else:
            if edit.content is None:
                raise ToolError.invalid_arguments(f"{where}: {edit.op} needs `content`")
            new = split_content(edit.content, hash_len, where)
            if edges and not new:
                raise ToolError.invalid_arguments(f"{where}: insert_after with empty `content`")
        out.append(ParsedEdit(i, edit.op, first, last, new))
    return out


def split_content(content: str, hash_len: int, where: str) -> list[bytes]:
    """The lines of ``content``: CRLF read as LF, one final newline ignored, ``""`` is none.

    Lines that all start with ``N:hash|`` were pasted from a read: refused, since writing the
    prefixes into the file is never what was meant."""
    text = content.replace("\r\n", "\n")
    if not text:
        return []
    lines = text.removesuffix("\n").split("\n")
    gutter = re.compile(rf"^\d+:[0-9a-z]{{{hash_len}}}\|")
    filled = [line for line in lines if line.strip()]
    if filled and all(gutter.match(line) for line in filled):
        raise ToolError.invalid_arguments(
            f"{where}.content starts every line with an `N:hash|` prefix copied from a read; "
            "send only the lines' text"
        )
    return [_encode(line) for line in lines]


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def stale_anchors(parsed: list[ParsedEdit], hasher: Hasher, total: int, field: str) -> list[Stale]:
    """Anchors that do not match the file as it is now (every one, not just the first)."""
    found: list[Stale] = []
    for edit in parsed:
        for name, anchor in (("anchor", edit.first), ("end_anchor", edit.last)):
            if anchor is None or anchor.hash is None:
                continue
            where = f"{field}[{edit.index}].{name}"
            if anchor.line > total:
                found.append(Stale(where, anchor.text, anchor.line, None))
            elif hasher(anchor.line) != anchor.hash:
                found.append(Stale(where, anchor.text, anchor.line, hasher.line(anchor.line)))
    return found


def plan(parsed: list[ParsedEdit], total: int, field: str) -> list[Splice]:
    """The edits as splices in file order; ``invalid_arguments`` when two touch one line."""
    splices: list[Splice] = []
    for edit in parsed:
        if edit.op == "insert_after":
            at = total if edit.first.end else edit.first.line
            anchored = None if edit.first.end else edit.first.line
            splices.append(Splice(edit.index, at, at, edit.new, anchored))
        else:
            last = edit.last.line if edit.last is not None else edit.first.line
            splices.append(Splice(edit.index, edit.first.line - 1, last, edit.new))
    ranges = sorted((s for s in splices if s.stop > s.start), key=lambda s: s.start)
    for before, after in pairwise(ranges):
        if after.start < before.stop:
            raise ToolError.invalid_arguments(
                f"{field}[{before.index}] and {field}[{after.index}] both change line "
                f"{after.start + 1}; merge them into one edit"
            )
    for insert in splices:
        line = insert.anchored
        for rng in ranges if line else ():
            if line is not None and rng.start < line <= rng.stop:
                raise ToolError.invalid_arguments(
                    f"{field}[{insert.index}] inserts after line {line}, which "
                    f"{field}[{rng.index}] replaces or deletes; put the new lines in that edit"
                )
    return sorted(splices, key=lambda s: (s.start, s.stop > s.start, s.index))


def apply(lines: FileLines, splices: list[Splice]) -> Applied:
    """The new file: untouched lines keep their bytes and terminators; new lines take the
    file's newline; a file that ended without a newline still does."""
    newline = lines.newline
    bodies: list[bytes] = []
    terms: list[bytes] = []
    regions: dict[int, tuple[int, int]] = {}
    pos = 0
    for splice in splices:
        bodies += lines.bodies[pos : splice.start]
        terms += lines.terms[pos : splice.start]
        regions[splice.index] = (len(bodies), len(splice.new))
        bodies += splice.new
        terms += [newline] * len(splice.new)
        pos = max(pos, splice.stop)
    bodies += lines.bodies[pos:]
    terms += lines.terms[pos:]
    terms = [t or newline for t in terms]
    if terms and not lines.final_newline:
        terms[-1] = b""
    return Applied(FileLines(bodies, terms), [regions[i] for i in sorted(regions)])


def windows(
    spans: list[tuple[int, int]], total: int, chunk: int | None, context: int = CONTEXT_LINES
) -> list[tuple[int, int]]:
    """1-based inclusive line ranges around ``spans`` (0-based first line, count) with
    ``context`` lines, covering whole chunks when ``chunk`` is given (an edit re-hashes the
    chunks of its lines), merged when they touch."""
    out: list[tuple[int, int]] = []
    for first, count in sorted(spans):
        last = first + max(count, 1) - 1
        lo, hi = first - context, last + context
        if chunk:
            lo, hi = min(lo, first // chunk * chunk), max(hi, (last // chunk + 1) * chunk - 1)
        lo, hi = max(lo, 0) + 1, min(hi, total - 1) + 1
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def render(hasher: Hasher, ranges: list[tuple[int, int]]) -> str:
    """The lines of ``ranges`` as ``N:hash|text``, ``--`` between ranges, capped in length."""
    blocks: list[str] = []
    shown = 0
    for lo, hi in ranges:
        if shown >= MAX_SNIPPET_LINES:
            blocks.append("… (more lines changed; read the file to see them)")
            break
        hi = min(hi, lo + MAX_SNIPPET_LINES - shown - 1)
        blocks.append("\n".join(hasher.line(n) for n in range(lo, hi + 1)))
        shown += hi - lo + 1
    return "\n--\n".join(blocks)
