"""The Hashline scheme: how a line's short hash is made, shown and quoted back as an anchor.

A line is shown as ``N:hash|text`` (``12:a3f|    return x``); ``N:hash`` is its *anchor*. An
edit names the lines it changes by anchor, and the edit tool recomputes each hash on the file
as it is now: a line that changed since the model saw it no longer matches, so the edit is
refused instead of landing on the wrong line.

**Lines.** The file's bytes split at ``\\n``; a line's *body* is its bytes without the
terminator (``\\n``, or ``\\r\\n``). A final newline does not start another line, so ``a\\nb\\n``
and ``a\\nb`` both have two lines and an empty file has none.

**Digest** (BLAKE2b with an 8-byte digest, so every process and worker agrees):

* ``content_only``: ``BLAKE2b(body)``: the line's bytes alone.
* ``chunk`` (the default): the file is cut into chunks of ``chunk_size`` lines (lines 1-8,
  9-16, ... for 8), and line N hashes the whole chunk it is in plus its offset there:
  ``BLAKE2b(bodies of the chunk joined by "\\n" + "\\0" + str((N - 1) % chunk_size))``.

**Hash**: the digest as a big-endian 64-bit integer; its top ``5 * hash_len`` bits written in
base 32 with the alphabet ``0123456789abcdefghjkmnpqrstvwxyz`` (no i, l, o, u), most
significant digit first.

Why the chunk: an anchor is always checked at its own line number, so mixing the position in
alone would add nothing. Mixing in the neighbours does: under ``content_only`` a repeated line
(``}``, a blank line) pushed down by an insertion above still matches at its old number, while
under ``chunk`` the chunk's text changed and the anchor is refused. The price is that an edit
also changes the anchors of the other lines of its chunk (the edit tool shows them fresh).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from toolhub.backends.workspace import Workspace
from toolhub.core import ToolError
from toolhub.core.requirements import EvalContext, Expr

from .text import clip

NAMESPACE = "Hashline"
FAMILY = "file_tools"
"""Shared with the Main and Codex file tools: a tool set enables one family of them."""
TOOL_IDS = frozenset({"hashline_read", "hashline_edit", "hashline_grep"})
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
LINE_CHARS = 2000
MAX_OUTPUT_CHARS = 100_000
"""About what a read or grep returns at most (line texts), like ``Main:read_file``."""
_EXAMPLE = "a3f7"
_ANCHOR = re.compile(r"^(\d+):([0-9a-z]+)$")
_EDGE_TOP = {"0", "0:"}
_EDGE_END = {"eof", "eof:"}


class HashlineParams(BaseModel):
    """One value for the whole namespace: the read, grep and edit tools must hash alike."""

    scheme: Literal["chunk", "content_only"] = Field(
        "chunk",
        description="`chunk`: a line's hash covers its chunk of `chunk_size` lines and its "
        "offset there; `content_only`: the line's text alone.",
    )
    hash_len: int = Field(3, ge=1, le=4, description="Characters of each line's hash (1-4).")
    chunk_size: int = Field(8, ge=1, le=1024, description="Lines per chunk (`chunk` scheme).")


def scheme_extra(params: BaseModel | None) -> dict[str, Any]:
    """Template variables for the descriptions: the hash length and an anchor to show."""
    p = params if isinstance(params, HashlineParams) else HashlineParams()
    return {
        "hash_len": p.hash_len,
        "example": f"12:{_EXAMPLE[: p.hash_len]}",
        "scheme": p.scheme,
        "chunk_size": p.chunk_size,
    }


class AnchoredLine(BaseModel):
    """One line as the model sees it; ``render()`` is the ``N:hash|text`` form."""

    line: int
    hash: str
    text: str

    def render(self) -> str:
        return f"{self.line}:{self.hash}|{self.text}"


@dataclass(frozen=True, slots=True)
class SameSchemeParams(Expr):
    """Every Hashline tool of the tool set has this tool's params.

    The params live in the container keyed by type, so the tools share one value and the last
    applied wins: a read tool hashing with 2 characters beside an edit tool checking 3 would
    refuse every anchor. Requiring equal params turns that into a config violation.
    """

    def evaluate(self, ctx: Any) -> bool:
        if not isinstance(ctx, EvalContext):
            return True
        return all(
            t.params == ctx.self_params
            for t in ctx.tools
            if t.namespace == NAMESPACE and t.id in TOOL_IDS
        )

    def explain(self) -> str:
        return (
            "the same `scheme`, `hash_len` and `chunk_size` params on every Hashline tool (they "
            "share one value; hashes made under one setting never match another)"
        )

    def to_json(self) -> Any:
        return {"same_params_in_namespace": NAMESPACE}


class HashlineFamily:
    """What the three Hashline tools have in common: their namespace and variant family, the
    shared scheme params (one value, checked by ``SameSchemeParams``) and the template
    variables their descriptions use. Listed before ``Tool`` in a tool's bases."""

    namespace: ClassVar[str] = NAMESPACE
    params_model: ClassVar[type[BaseModel] | None] = HashlineParams
    requires: ClassVar[Expr] = SameSchemeParams()
    variant_family: ClassVar[str | None] = FAMILY

    def template_extra(self, params: BaseModel | None) -> dict[str, Any]:
        return scheme_extra(params)


@dataclass(slots=True)
class FileLines:
    """A file as line bodies and their terminators (``b"\\n"``, ``b"\\r\\n"`` or, for a last
    line without a newline, ``b""``), so untouched lines are written back byte for byte."""

    bodies: list[bytes]
    terms: list[bytes]

    @classmethod
    def parse(cls, data: bytes) -> FileLines:
        pieces = data.split(b"\n")
        last = pieces.pop()
        bodies: list[bytes] = []
        terms: list[bytes] = []
        for piece in pieces:
            crlf = piece.endswith(b"\r")
            bodies.append(piece[:-1] if crlf else piece)
            terms.append(b"\r\n" if crlf else b"\n")
        if last:
            bodies.append(last)
            terms.append(b"")
        return cls(bodies, terms)

    def __len__(self) -> int:
        return len(self.bodies)

    @property
    def newline(self) -> bytes:
        """The terminator for new lines: CRLF when every line has one, else LF."""
        ended = [t for t in self.terms if t]
        return b"\r\n" if ended and all(t == b"\r\n" for t in ended) else b"\n"

    @property
    def final_newline(self) -> bool:
        return not self.terms or self.terms[-1] != b""

    def to_bytes(self) -> bytes:
        return b"".join(b + t for b, t in zip(self.bodies, self.terms, strict=True))


@dataclass(slots=True)
class Hasher:
    """Line hashes of one file content, computed on demand (a chunk's digest is shared by its
    lines, so reading a page costs one pass over the chunks it touches)."""

    params: HashlineParams
    bodies: list[bytes]
    _chunks: dict[int, Any] = field(default_factory=dict)

    def __call__(self, number: int) -> str:
        """The hash of line ``number`` (1-based, within the file)."""
        body = self.bodies[number - 1]
        if self.params.scheme == "content_only":
            digest = hashlib.blake2b(body, digest_size=8).digest()
        else:
            size = self.params.chunk_size
            index, offset = divmod(number - 1, size)
            base = self._chunks.get(index)
            if base is None:
                joined = b"\n".join(self.bodies[index * size : (index + 1) * size])
                base = self._chunks[index] = hashlib.blake2b(joined, digest_size=8)
            state = base.copy()
            state.update(b"\0" + str(offset).encode())
            digest = state.digest()
        return encode(digest, self.params.hash_len)

    def line(self, number: int) -> str:
        """``N:hash|text`` for line ``number``, the text made printable and cut if very long."""
        return f"{number}:{self(number)}|{display(self.bodies[number - 1])}"


def encode(digest: bytes, length: int) -> str:
    value = int.from_bytes(digest[:8], "big")
    return "".join(ALPHABET[(value >> (59 - 5 * i)) & 31] for i in range(length))


def display(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    return clip(text, LINE_CHARS, len(body)) if len(text) > LINE_CHARS else text


@dataclass(frozen=True, slots=True)
class Anchor:
    """A parsed anchor: ``line`` 0 is the top of the file; ``end`` means after the last line."""

    text: str
    line: int
    hash: str | None = None
    end: bool = False


def parse_anchor(raw: str, hash_len: int, where: str, *, edges: bool) -> Anchor:
    """``N:hash`` (a pasted ``|text`` tail, quotes and case are forgiven); with ``edges`` also
    ``0`` (before line 1) and ``EOF`` (after the last line). Anything else is
    ``invalid_arguments`` naming ``where`` and the expected shape."""
    text = raw.strip().strip("`'\"").split("|", 1)[0].strip().lower()
    shape = f"`N:{'h' * hash_len}` (e.g. `12:{_EXAMPLE[:hash_len]}`)"
    if edges and text in _EDGE_TOP:
        return Anchor(raw, 0)
    if edges and text in _EDGE_END:
        return Anchor(raw, 0, end=True)
    if not edges and (text in _EDGE_TOP or text in _EDGE_END):
        raise ToolError.invalid_arguments(
            f"{where} is `{raw}`: `0` and `EOF` are only for insert_after; replace and delete "
            f"need the anchor of a real line, {shape}"
        )
    found = _ANCHOR.match(text)
    if found is None or any(c not in ALPHABET for c in found.group(2)):
        raise ToolError.invalid_arguments(
            f"{where} `{raw[:80]}` is not an anchor: expected {shape}, the line number and hash "
            "exactly as the hashline tools show them"
        )
    number, digest = int(found.group(1)), found.group(2)
    if number == 0:
        raise ToolError.invalid_arguments(f"{where} `{raw}`: line numbers start at 1")
    if len(digest) != hash_len:
        raise ToolError.invalid_arguments(
            f"{where} `{raw}` has a {len(digest)}-character hash; this tool set uses "
            f"{hash_len}-character hashes, {shape}. Copy anchors exactly as shown"
        )
    return Anchor(raw, number, digest)


class TooLargeError(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def load(ws: Workspace, path: Path, limit: int) -> bytes:
    """The whole regular file (hashes need every byte of a line). ``FileNotFoundError``,
    ``IsADirectoryError``, ``SpecialFileError`` as ``Workspace.open_read`` raises them, and
    ``TooLargeError`` over ``limit`` bytes: nothing over the limit is read."""
    with ws.open_read(path) as handle:
        found = os.fstat(handle.fileno())
        if stat.S_ISREG(found.st_mode) and found.st_size > limit:
            raise TooLargeError(found.st_size)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLargeError(len(data))
    return data
