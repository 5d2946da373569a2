"""``read_file``: a window of a text file with line numbers, an image as a content block, or
pages of a PDF (text, or images for pages without a text layer).

The file is streamed: lines before the window are skipped as they are read, lines after it are
only counted, and each line is capped, so reading a 10 MB file costs the window, not the file.
It is opened once, beneath the workspace root with no symlink followed and without blocking
(``Workspace.open_read``), and every decision (missing, directory, FIFO, binary) is made on
that descriptor, so nothing swapped in after the check is read.
The window is capped in lines and in bytes; when it is cut, the hint names the client's own
``offset``/``limit`` parameters so that the model can ask for the next window.

A file that starts with ``%PDF-`` is a PDF whatever its name, read through the same descriptor
(``toolhub/tools/read_pdf.py``, ``toolhub/backends/pdf.py``): ``pages`` picks pages, without it
the call gives the page count and the first pages' text.

Versions: ``current`` numbers the first line shown and every 10th line (every line keeps the same
gutter width, so text columns line up), and reads PDFs; ``legacy-1`` numbers every line and
knows no PDFs (a PDF is read as any other file, and ``pages`` is refused): a pinned client keeps
the behaviour it was pinned to.
"""

from __future__ import annotations

import base64
import difflib
import os
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel, Field

from toolhub.backends.pdf import is_pdf
from toolhub.backends.workspace import SpecialFileError, Workspace
from toolhub.core import (
    BehaviorVersion,
    ContentBlock,
    Params,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
)

from .read_pdf import ImageData, PdfLimits, PdfPage, parse_pages, pdf_text, read_pdf
from .text import (
    SNIFF_BYTES,
    clip,
    count_lines,
    decode_line,
    gutter,
    image_mime,
    iter_lines,
    kind_name,
    looks_binary,
)

LEGACY = "legacy-1"
NUMBER_EVERY = 10

ReadStatus = Literal[
    "ok",
    "empty",
    "past_end",
    "not_found",
    "is_directory",
    "binary",
    "image",
    "image_too_large",
    "pdf",
    "pdf_encrypted",
    "pdf_invalid",
]


class ReadFileArgs(BaseModel):
    path: str = Field(description="The file to read: relative to the workspace, or absolute.")
    offset: int | None = Field(
        None,
        description="1-based line to start at. Negative counts from the end: -20 starts 20 "
        "lines before the end.",
    )
    limit: int | None = Field(None, ge=1, description="How many lines to read at most.")
    pages: str | None = Field(
        None,
        description='PDF only: the pages to read, 1-based, such as "3" or "1-3,7" (at most '
        "${{ max_pdf_pages }} per call). Pages with text come back as text, pages without a "
        "text layer as images. Leave it out for the page count and the first pages' text.",
    )


class ReadFileParams(BaseModel):
    max_lines: int = Field(2000, ge=1)
    max_bytes: int = Field(100_000, ge=1000, description="Cap on the text returned.")
    max_line_chars: int = Field(2000, ge=80)
    max_image_bytes: int = Field(5 << 20, ge=1, description="Cap on one image (file or page).")
    max_pdf_pages: int = Field(20, ge=1, le=100, description="Pages one call may ask for.")
    max_pdf_page_chars: int = Field(20_000, ge=100, description="Cap on one PDF page's text.")
    max_pdf_render_px: int = Field(1568, ge=64, le=4096, description="Longest side of a page.")
    max_pdf_render_bytes: int = Field(
        10 << 20, ge=1, description="Cap on the PNG bytes of all rendered pages of one call."
    )

    def pdf_limits(self) -> PdfLimits:
        return PdfLimits(
            max_pages=self.max_pdf_pages,
            max_page_chars=self.max_pdf_page_chars,
            max_text_chars=self.max_bytes,
            max_render_px=self.max_pdf_render_px,
            max_image_bytes=self.max_image_bytes,
            max_render_bytes=self.max_pdf_render_bytes,
        )


class ReadFileOutput(BaseModel):
    path: str
    status: ReadStatus
    content: str = ""
    start_line: int = 0
    end_line: int = 0
    total_lines: int | None = None
    size_bytes: int = 0
    truncated: bool = False
    hint: str = ""
    image: ImageData | None = None
    total_pages: int | None = None
    pages: list[PdfPage] = Field(default_factory=list)
    """A PDF's pages as read (``content`` stays empty for a PDF: the text is here, per page)."""

    def model_text(self) -> str:
        if self.status == "pdf":
            return pdf_text(self.path, self.total_pages, self.pages, self.hint)
        if self.status == "ok":
            return f"{self.content}\n\n{self.hint}" if self.hint else self.content
        if self.status == "image" and self.image is not None:
            return f"[image {self.path}: {self.image.mime_type}, {self.size_bytes} bytes]"
        return self.hint

    def content_blocks(self) -> list[ContentBlock]:
        """The image, or the rendered PDF pages in page order, as content blocks (for formats
        that carry images next to text)."""
        shown = [(self.path, self.image)] if self.image is not None else []
        shown += [(f"{self.path}#page={p.number}", p.image) for p in self.pages if p.image]
        return [
            ContentBlock("image", data=image.data, mime_type=image.mime_type, path=path)
            for path, image in shown
        ]


class ReadFile(Tool[ReadFileArgs, ReadFileOutput]):
    id = "read_file"
    kind = ToolKind.READ
    description_template = (
        "Read a file from the workspace. Text comes back with a line-number gutter "
        "(`     10→text`; at least the first line and every 10th line are numbered). By default "
        "up to ${{ max_lines }} lines from the start; use `${{ params.read.offset }}` (1-based, "
        "negative counts from the end) and `${{ params.read.limit }}` for other parts of long "
        "files. Images (PNG, JPEG, GIF, WebP) are returned as images. PDFs: pass "
        '`${{ params.read.pages }}` (such as "1-3,7", at most ${{ max_pdf_pages }} pages per '
        "call); pages with text come back as text, pages without as images; without it, the "
        "page count and the first pages' text. Other binary files are refused."
    )
    versions = (
        BehaviorVersion(
            "current", summary="line numbers on the first line and every 10th; reads PDFs"
        ),
        BehaviorVersion(LEGACY, summary="line numbers on every line; no PDF pages"),
    )
    params_model = ReadFileParams
    variant_family = "file_tools"

    def template_extra(self, params: BaseModel | None) -> dict[str, object]:
        p = params if isinstance(params, ReadFileParams) else ReadFileParams()
        return {"max_lines": p.max_lines, "max_pdf_pages": p.max_pdf_pages}

    def run(self, ctx: ToolContext, args: ReadFileArgs) -> ReadFileOutput:
        ws = ctx.container.require(Workspace)
        params = ctx.container.get_or_default(Params[ReadFileParams])
        legacy = ctx.behavior_version == LEGACY
        requested = _requested_pages(ctx, args, params, legacy)
        path = ws.resolve(args.path)
        shown = ws.display(path)
        try:
            handle = ws.open_read(path)
        except FileNotFoundError:
            return ReadFileOutput(path=shown, status="not_found", hint=_not_found(ws, path))
        except IsADirectoryError:
            lister = kind_name(ctx, ToolKind.LIST_DIR, "list_dir")
            return ReadFileOutput(
                path=shown,
                status="is_directory",
                hint=f"{shown} is a directory, not a file. Use `{lister}` to see what it holds.",
            )
        except SpecialFileError as exc:
            return ReadFileOutput(
                path=shown,
                status="binary",
                hint=f"{shown} is not a regular file ({exc.strerror}); not read.",
            )
        with handle:
            sample = handle.read(SNIFF_BYTES)
            size = os.fstat(handle.fileno()).st_size
            if not legacy and is_pdf(sample):
                return _pdf(ctx, args, params, shown, size, handle, requested)
            if requested is not None:
                raise ToolError.invalid_arguments(
                    f"`{ctx.param_name('pages')}` is for PDF files, and {shown} is not one (it "
                    f"does not start with `%PDF-`); read a text file by lines with "
                    f"`{ctx.param_name('offset')}` and `{ctx.param_name('limit')}`."
                )
            mime = image_mime(sample)
            if mime is not None:
                return _image(shown, handle, mime, size, params)
            if looks_binary(sample):
                return ReadFileOutput(
                    path=shown,
                    status="binary",
                    size_bytes=size,
                    hint=f"{shown} is a binary file ({size} bytes); its contents are not shown.",
                )
            handle.seek(0)
            return _window(ctx, args, params, shown, size, handle)


def _requested_pages(
    ctx: ToolContext, args: ReadFileArgs, params: ReadFileParams, legacy: bool
) -> list[int] | None:
    """The pages asked for, checked before the file is opened; None when not asked (a blank
    value counts as not asked: models send ``""`` for "leave it out")."""
    if args.pages is None or not args.pages.strip():
        return None
    name = ctx.param_name("pages")
    if legacy:
        raise ToolError.invalid_arguments(
            f"`{name}` needs read_file's current behaviour; this tool set pins {LEGACY}, which "
            "does not read PDF pages."
        )
    return parse_pages(args.pages, max_pages=params.max_pdf_pages, name=name)


def _pdf(
    ctx: ToolContext,
    args: ReadFileArgs,
    params: ReadFileParams,
    shown: str,
    size: int,
    handle: BinaryIO,
    requested: list[int] | None,
) -> ReadFileOutput:
    handle.seek(0)
    read = read_pdf(ctx, handle, shown, requested, params.pdf_limits())
    hint = read.hint
    if args.offset is not None or args.limit is not None:
        off, lim = ctx.param_name("offset"), ctx.param_name("limit")
        note = f"(`{off}`/`{lim}` count lines of text files; a PDF is read by pages.)"
        hint = f"{hint}\n{note}" if hint else note
    return ReadFileOutput(
        path=shown,
        status=read.status,
        size_bytes=size,
        truncated=read.truncated,
        hint=hint,
        total_pages=read.total_pages,
        pages=read.pages,
    )


def _window(
    ctx: ToolContext,
    args: ReadFileArgs,
    params: ReadFileParams,
    shown: str,
    size: int,
    fh: BinaryIO,
) -> ReadFileOutput:
    if size == 0:
        return ReadFileOutput(path=shown, status="empty", hint=f"{shown} is empty (0 bytes).")
    offset = args.offset or 1
    total: int | None = None
    if offset < 0:
        total = count_lines(fh)
        fh.seek(0)
        offset = max(1, total + offset + 1)
    limit = min(args.limit or params.max_lines, params.max_lines)
    legacy = ctx.behavior_version == LEGACY
    reader = iter_lines(fh, params.max_line_chars * 4)
    skipped = sum(1 for _ in zip(range(offset - 1), reader, strict=False))
    lines: list[str] = []
    used = 0
    read_ahead = 0
    exhausted = skipped < offset - 1
    while not exhausted and len(lines) < limit:
        item = next(reader, None)
        if item is None:
            exhausted = True
            break
        raw, length = item
        number = offset + len(lines)
        text = clip(decode_line(raw), params.max_line_chars, length)
        numbered = legacy or not lines or number % NUMBER_EVERY == 0
        line = gutter(number if numbered else None, text)
        if lines and used + len(line) + 1 > params.max_bytes:
            read_ahead = 1
            break
        lines.append(line)
        used += len(line) + 1
    end = offset + len(lines) - 1
    if total is None:
        total = skipped + len(lines) + (0 if exhausted else read_ahead + count_lines(fh))
    if not lines:
        return ReadFileOutput(
            path=shown,
            status="past_end",
            total_lines=total,
            size_bytes=size,
            hint=f"{shown} has {total} lines; `{ctx.param_name('offset')}` {args.offset} is past "
            f"the end.",
        )
    truncated = end < total
    hint = ""
    if truncated:
        why = f"the {params.max_bytes}-byte cap" if read_ahead else None
        hint = _more_hint(ctx, offset, end, total, params.max_lines, why)
    elif offset > 1 or args.limit is not None:
        hint = f"(lines {offset}-{end} of {total})"
    return ReadFileOutput(
        path=shown,
        status="ok",
        content="\n".join(lines),
        start_line=offset,
        end_line=end,
        total_lines=total,
        size_bytes=size,
        truncated=truncated,
        hint=hint,
    )


def _more_hint(
    ctx: ToolContext, start: int, end: int, total: int, max_lines: int, why: str | None
) -> str:
    off, lim = ctx.param_name("offset"), ctx.param_name("limit")
    reason = f" (cut at {why})" if why else ""
    return (
        f"[Showing lines {start}-{end} of {total}{reason}. To read more, call "
        f"`{ctx.client_name or 'read_file'}` with `{off}`={end + 1}, and `{lim}` up to "
        f"{max_lines} lines.]"
    )


def _image(
    shown: str, handle: BinaryIO, mime: str, size: int, params: ReadFileParams
) -> ReadFileOutput:
    handle.seek(0)
    raw = handle.read(params.max_image_bytes + 1)
    if max(size, len(raw)) > params.max_image_bytes:
        return ReadFileOutput(
            path=shown,
            status="image_too_large",
            size_bytes=size,
            hint=f"{shown} is an image of {size} bytes, above the {params.max_image_bytes}-byte "
            "limit; it is not shown.",
        )
    data = base64.b64encode(raw).decode("ascii")
    return ReadFileOutput(
        path=shown, status="image", size_bytes=size, image=ImageData(mime_type=mime, data=data)
    )


def _not_found(ws: Workspace, path: Path) -> str:
    shown = ws.display(path)
    text = f"File not found: {shown}"
    try:
        entries, _ = ws.entries(path.parent, limit=2000)
    except (OSError, ToolError):
        entries = []
    close = difflib.get_close_matches(path.name, [e.name for e in entries], n=3, cutoff=0.6)
    if close:
        rel = ws.display(path.parent)
        guesses = ", ".join(f"`{name if rel == '.' else f'{rel}/{name}'}`" for name in close)
        text += f". Did you mean {guesses}?"
    return text


TOOLS: list[type[Tool[Any, Any]]] = [ReadFile]
