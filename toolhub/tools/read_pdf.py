"""``read_file`` on a PDF: the ``pages`` argument, pages as text or as images, and the summary.

A page with a text layer comes back as its text; a page without one (a scan, a drawing) is
rendered to a PNG and comes back as an image content block, the way ``read_file`` returns
image files. Without ``pages`` the call is cheap and predictable: the page count and the text
of the first pages, never a render, with a hint naming the client's ``pages`` parameter.

Every call is bounded whatever the document: at most ``max_pages`` pages, each page's text cut
to ``max_page_chars``, all text together to ``max_text_chars`` (read_file's ``max_bytes``), each
image to ``max_image_bytes`` and all images together to ``max_render_bytes``. Pages that did not
fit are named in the hint, as the next ``pages`` to ask for. The document itself is read by
``toolhub/backends/pdf.py`` from the descriptor ``Workspace.open_read`` opened.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, Literal

from pydantic import BaseModel

from toolhub.backends.pdf import PdfOpenError, PdfPageError, PdfReader, open_pdf
from toolhub.core import ToolContext, ToolError

MAX_SPEC_CHARS = 200
_PART = re.compile(r"\s*([0-9]{1,9})\s*(?:-\s*([0-9]{1,9})\s*)?")

PageKind = Literal["text", "image", "no_text", "unreadable"]
PdfStatus = Literal["pdf", "past_end", "pdf_encrypted", "pdf_invalid"]


class ImageData(BaseModel):
    mime_type: str
    data: str
    """Base64 of the image: the file's bytes, or a PDF page rendered as PNG."""
    width: int | None = None
    height: int | None = None


class PdfPage(BaseModel):
    """One page of a PDF as read: its text, or (no text layer) its rendering."""

    number: int
    kind: PageKind
    """``text``; ``image`` (no text layer, rendered); ``no_text`` (no text layer, not rendered:
    the call gave no ``pages``, or the page did not fit the image cap); ``unreadable``."""
    text: str = ""
    chars: int = 0
    """Characters on the page before any cut."""
    truncated: bool = False
    image: ImageData | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class PdfLimits:
    max_pages: int
    max_page_chars: int
    max_text_chars: int
    max_render_px: int
    max_image_bytes: int
    max_render_bytes: int


@dataclass(slots=True)
class PdfRead:
    """What ``read_file`` puts in its output for a PDF."""

    status: PdfStatus
    total_pages: int | None = None
    pages: list[PdfPage] = field(default_factory=list)
    truncated: bool = False
    hint: str = ""


def parse_pages(spec: str, *, max_pages: int, name: str = "pages") -> list[int]:
    """``"1-3,7"`` as ``[1, 2, 3, 7]`` (1-based, sorted, each page once).

    A malformed part, page 0, a reversed range or more than ``max_pages`` pages is
    ``invalid_arguments`` naming the client's parameter ``name``. Whether the pages exist is
    the document's business, decided once it is open.
    """
    if len(spec) > MAX_SPEC_CHARS:
        raise _bad(name, spec, f"is longer than {MAX_SPEC_CHARS} characters")
    numbers: set[int] = set()
    for part in spec.split(","):
        found = _PART.fullmatch(part)
        if found is None:
            raise _bad(name, spec, f"has `{part.strip()}`, not a page (`7`) or a range (`1-3`)")
        first = int(found[1])
        last = int(found[2]) if found[2] is not None else first
        if first == 0:
            raise _bad(name, spec, "counts from 1: there is no page 0")
        if last < first:
            raise _bad(
                name, spec, f"has the reversed range `{first}-{last}`; write `{last}-{first}`"
            )
        if last - first + 1 > max_pages:  # before building it: `1-999999999` costs nothing
            raise _too_many(name, spec, last - first + 1, max_pages)
        numbers.update(range(first, last + 1))
        if len(numbers) > max_pages:
            raise _too_many(name, spec, len(numbers), max_pages)
    return sorted(numbers)


def ranges(numbers: Sequence[int]) -> str:
    """Sorted page numbers written back as a ``pages`` value: ``[1, 2, 3, 7]`` → ``"1-3,7"``."""
    parts: list[str] = []
    start = prev = None
    for n in [*numbers, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    return ",".join(parts)


def read_pdf(
    ctx: ToolContext,
    handle: BinaryIO,
    shown: str,
    requested: list[int] | None,
    limits: PdfLimits,
) -> PdfRead:
    """Read ``requested`` pages (None: the summary) of the PDF open in ``handle``."""
    try:
        with open_pdf(handle) as doc:
            total = doc.page_count
            if requested is None:
                numbers = list(range(1, min(total, limits.max_pages) + 1))
            else:
                numbers = [n for n in requested if n <= total]
                if not numbers:
                    spec = ranges(requested)
                    return PdfRead(
                        "past_end",
                        total_pages=total,
                        hint=f'{shown} has {total} page{_s(total)}; `{_name(ctx)}` "{spec}" '
                        "is past the end.",
                    )
            pages, rest, why = _collect(ctx, doc, numbers, requested is not None, limits)
    except PdfOpenError as exc:
        if exc.reason == "encrypted":
            return PdfRead(
                "pdf_encrypted",
                hint=f"{shown} is an encrypted PDF ({exc.detail}); its pages cannot be read "
                "(this tool takes no password).",
            )
        return PdfRead(
            "pdf_invalid",
            hint=f"{shown} starts like a PDF but cannot be opened ({exc.detail}); it may be "
            "damaged or truncated.",
        )
    notes: list[str] = []
    if requested is None:
        if rest or total > len(numbers):
            start = rest[0] if rest else len(numbers) + 1
            left = f"{start}-{total}" if start < total else str(start)
            notes.append(_more(ctx, left, why, limits.max_pages))
        blank = [p.number for p in pages if p.kind == "no_text"]
        if blank:
            one = len(blank) == 1
            notes.append(
                f"[Page{_s(len(blank))} {ranges(blank)} {'has' if one else 'have'} no text "
                f'layer: pass `{_name(ctx)}`="{ranges(blank[: limits.max_pages])}" to see '
                f"{'it as an image' if one else 'them as images'}.]"
            )
    else:
        if rest:
            notes.append(_more(ctx, ranges(rest), why, limits.max_pages))
        missing = [n for n in requested if n > total]
        if missing:
            notes.append(
                f"[The document has {total} page{_s(total)}; page{_s(len(missing))} "
                f"{ranges(missing)} do{'es' if len(missing) == 1 else ''} not exist.]"
            )
    return PdfRead(
        "pdf",
        total_pages=total,
        pages=pages,
        truncated=bool(rest) or any(p.truncated for p in pages) or total > len(pages),
        hint="\n".join(notes),
    )


def _collect(
    ctx: ToolContext, doc: PdfReader, numbers: list[int], render: bool, limits: PdfLimits
) -> tuple[list[PdfPage], list[int], str]:
    """Pages until one does not fit a cap: (pages read, pages left over, which cap)."""
    out: list[PdfPage] = []
    text_left, images_left = limits.max_text_chars, limits.max_render_bytes
    for index, number in enumerate(numbers):
        if ctx.cancel.cancelled:
            raise ToolError.cancelled()
        try:
            page = doc.text(number, limits.max_page_chars)
        except PdfPageError as exc:
            out.append(PdfPage(number=number, kind="unreadable", note=str(exc)))
            continue
        if page.text.strip():
            if len(page.text) > text_left and out:
                return out, numbers[index:], f"the {limits.max_text_chars}-character cap on text"
            text = page.text[:text_left]
            out.append(
                PdfPage(
                    number=number,
                    kind="text",
                    text=text,
                    chars=page.chars,
                    truncated=page.truncated or len(text) < len(page.text),
                )
            )
            text_left -= len(text)
            continue
        if not render:
            out.append(PdfPage(number=number, kind="no_text"))
            continue
        # The first image may be rendered smaller to fit the call's budget; a later one that
        # does not fit what is left waits for the next call, where it gets its full size.
        first_image = images_left == limits.max_render_bytes
        cap = min(limits.max_image_bytes, images_left) if first_image else limits.max_image_bytes
        try:
            image = doc.render(number, limits.max_render_px, cap)
        except PdfPageError as exc:
            out.append(PdfPage(number=number, kind="unreadable", note=str(exc)))
            continue
        if image is not None and len(image.png) > images_left:
            return out, numbers[index:], f"the {limits.max_render_bytes}-byte cap on images"
        if image is None:
            note = f"no text layer, and too detailed to render within {cap} bytes"
            out.append(PdfPage(number=number, kind="no_text", note=note))
            continue
        images_left -= len(image.png)
        data = base64.b64encode(image.png).decode("ascii")
        out.append(
            PdfPage(
                number=number,
                kind="image",
                image=ImageData(
                    mime_type="image/png", data=data, width=image.width, height=image.height
                ),
            )
        )
    return out, [], ""


def pdf_text(path: str, total: int | None, pages: Sequence[PdfPage], hint: str) -> str:
    """What the model reads: a header, each page's section, then the hints. Images travel as
    content blocks after the text, in page order; each section says which one is its page."""
    shown = ranges([p.number for p in pages]) or "none"
    parts = [f"[{path}: PDF, {total} page{_s(total or 0)}; showing page{_s(len(pages))} {shown}]"]
    images = sum(p.image is not None for p in pages)
    seen = 0
    for page in pages:
        head = f"--- page {page.number}"
        if page.kind == "text":
            cut = (
                f"\n[page text cut: {len(page.text)} of {page.chars} characters shown]"
                if page.truncated
                else ""
            )
            parts.append(f"{head} ---\n{page.text}{cut}")
        elif page.kind == "image":
            seen += 1
            parts.append(f"{head}: no text layer; rendered as image {seen} of {images} ---")
        elif page.kind == "unreadable":
            parts.append(f"{head}: unreadable ({page.note}) ---")
        else:
            parts.append(f"{head}: no text layer{f' ({page.note})' if page.note else ''} ---")
    if hint:
        parts.append(hint)
    return "\n\n".join(parts)


def _more(ctx: ToolContext, left: str, why: str, max_pages: int) -> str:
    reason = f" (cut at {why})" if why else ""
    return (
        f"[Page{'s' if '-' in left or ',' in left else ''} {left} not shown{reason}. To read "
        f"on, call `{ctx.client_name or 'read_file'}` with `{_name(ctx)}`="
        f'"{_first_chunk(left, max_pages)}" (at most {max_pages} pages per call).]'
    )


def _first_chunk(left: str, max_pages: int) -> str:
    """One call's worth from the start of ``left``: ``"21-500"`` → ``"21-40"``; a list of
    pages left over from one call (``"4-6,9"``) is already one call's worth."""
    if "," in left or "-" not in left:
        return left
    first, last = (int(x) for x in left.split("-"))
    return f"{first}-{min(last, first + max_pages - 1)}"


def _name(ctx: ToolContext) -> str:
    return ctx.param_name("pages")


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _bad(name: str, spec: str, problem: str) -> ToolError:
    shown = spec if len(spec) <= 60 else f"{spec[:60]}…"
    return ToolError.invalid_arguments(
        f'`{name}` "{shown}" {problem}. Use pages and ranges such as "1-3,7" (1-based).'
    )


def _too_many(name: str, spec: str, count: int, max_pages: int) -> ToolError:
    return _bad(name, spec, f"asks for {count} pages; at most {max_pages} per call")
