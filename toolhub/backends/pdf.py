"""Pages of a PDF through pdfium (``pypdfium2``): text, or a bounded PNG, one page at a time.

Why it is shaped this way:

* **Opened from the descriptor the workspace opened.** ``Workspace.open_read`` has already
  opened the file beneath the root, following no symlink and without blocking
  (``toolhub/backends/beneath.py``). pdfium reads that same open file through a callback
  (``FPDF_LoadCustomDocument``), a block at a time as it needs them, so the path is never used
  by name again (nothing swapped in after the check is read) and the file is never read whole:
  a 500 MB PDF costs its cross-reference table and the pages asked for. So there is no cap on
  the file's size, only on what comes out of it.
* **One page at a time.** Only the pages asked for are loaded, each closed before the next.
* **Caps on what comes out.** Text per page (``max_chars``), the rendered page's longest side
  (``max_px``) and its PNG size (``max_bytes``: a page too detailed is rendered smaller until
  it fits, or not at all).
* **PNG without Pillow.** zlib and the three chunks a truecolour PNG needs: one dependency,
  not two, for a bitmap pdfium already made.
* **One lock.** pdfium is not thread-safe (pypdfium2's docs: use processes to parallelize), and
  calls run on worker threads; every use of it, for the whole life of an open document, holds
  ``_LOCK``.
* **Failures are values.** An encrypted or unreadable document is ``PdfOpenError``, one bad page
  ``PdfPageError``: the tool answers with what went wrong, never a traceback.
"""

from __future__ import annotations

import contextlib
import math
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal

PDF_MAGIC = b"%PDF-"
MAX_SCALE = 3.0
"""At most 216 dpi: a small page (a receipt, a slide) is not blown up past what reads well."""
RENDER_TRIES = 4
_LOCK = threading.RLock()
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ERR_PASSWORD = 4  # FPDF_ERR_PASSWORD
_ERR_SECURITY = 5  # FPDF_ERR_SECURITY: a security handler pdfium does not support
_ERR_NAMES = {
    0: "it has no pages",
    1: "unknown error",
    2: "file not found or unreadable",
    3: "not a PDF, or damaged",
}


def is_pdf(sample: bytes) -> bool:
    """The file starts with ``%PDF-``: decided by content, never by the name's extension."""
    return sample.startswith(PDF_MAGIC)


class PdfOpenError(Exception):
    """The document cannot be opened: ``encrypted`` (it needs a password) or ``invalid``."""

    def __init__(self, reason: Literal["encrypted", "invalid"], detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class PdfPageError(Exception):
    """One page cannot be loaded, read or rendered; the other pages may still be fine."""


@dataclass(frozen=True, slots=True)
class PageText:
    text: str
    """At most ``max_chars`` characters, CRLF made LF, control characters dropped."""
    chars: int
    """Characters pdfium counts on the page (before the cut)."""
    truncated: bool


@dataclass(frozen=True, slots=True)
class PageImage:
    png: bytes
    width: int
    height: int


class PdfReader:
    """An open document. Made by ``open_pdf``; valid (and holding the lock) inside its block."""

    def __init__(self, document: Any, pdfium: Any) -> None:
        self._doc = document
        self._pdfium = pdfium
        self.page_count: int = len(document)

    def text(self, number: int, max_chars: int) -> PageText:
        """The text layer of page ``number`` (1-based), cut to ``max_chars``."""
        with self._page(number) as page:
            textpage = page.get_textpage()
            try:
                count = max(0, int(textpage.count_chars()))
                raw = textpage.get_text_range(0, min(count, max_chars)) if count else ""
            finally:
                textpage.close()
        text = _CONTROL.sub("", raw.replace("\r\n", "\n").replace("\r", "\n")).rstrip()
        return PageText(text[:max_chars], count, count > max_chars)

    def render(self, number: int, max_px: int, max_bytes: int) -> PageImage | None:
        """Page ``number`` as a PNG whose longest side is at most ``max_px`` pixels and whose size
        is at most ``max_bytes``; rendered smaller when too big, None when it never fits."""
        with self._page(number) as page:
            width, height = float(page.get_width()), float(page.get_height())
            if not (math.isfinite(width) and math.isfinite(height)) or min(width, height) <= 0:
                raise PdfPageError(f"page {number} has no usable size ({width} x {height} pt)")
            scale = min(max_px / max(width, height), MAX_SCALE)
            for _ in range(RENDER_TRIES):
                image = self._render_once(page, scale, number)
                if len(image.png) <= max_bytes:
                    return image
                scale *= min(0.9, max(0.5, 0.9 * math.sqrt(max_bytes / len(image.png))))
        return None

    def _render_once(self, page: Any, scale: float, number: int) -> PageImage:
        try:
            bitmap = page.render(scale=scale, rev_byteorder=True, may_draw_forms=False)
        except (self._pdfium.PdfiumError, ValueError) as exc:
            raise PdfPageError(f"page {number} cannot be rendered: {exc}") from None
        try:
            if bitmap.n_channels != 3:  # rev_byteorder without alpha or BGRx: RGB, 3 bytes
                raise PdfPageError(f"page {number} rendered in an unexpected format")
            png = encode_png(bitmap.buffer, bitmap.width, bitmap.height, bitmap.stride)
            return PageImage(png, int(bitmap.width), int(bitmap.height))
        finally:
            bitmap.close()

    @contextlib.contextmanager
    def _page(self, number: int) -> Iterator[Any]:
        if not 1 <= number <= self.page_count:
            raise PdfPageError(f"page {number} is not in the document ({self.page_count} pages)")
        try:
            page = self._doc[number - 1]
        except self._pdfium.PdfiumError as exc:
            raise PdfPageError(f"page {number} cannot be loaded: {exc}") from None
        try:
            yield page
        except PdfPageError:
            raise
        except Exception as exc:  # pypdfium2 raises PdfiumError, ValueError, even an assert
            raise PdfPageError(f"page {number} cannot be read: {exc}") from None
        finally:
            page.close()


@contextlib.contextmanager
def open_pdf(handle: BinaryIO) -> Iterator[PdfReader]:
    """The document read from ``handle`` (an open, seekable file; it stays open and must not
    change while the block runs). ``PdfOpenError`` when it cannot be opened."""
    with _LOCK:
        import pypdfium2  # a slow import: paid by the first PDF, not by every toolhub import

        try:
            document = pypdfium2.PdfDocument(handle)
        except pypdfium2.PdfiumError as exc:
            raise _open_error(exc) from None
        except (OSError, ValueError) as exc:
            raise PdfOpenError("invalid", f"cannot be read: {exc}") from None
        try:
            yield PdfReader(document, pypdfium2)
        finally:
            document.close()


def _open_error(exc: Any) -> PdfOpenError:
    code = getattr(exc, "err_code", None)
    if code in (_ERR_PASSWORD, _ERR_SECURITY):
        why = "it needs a password" if code == _ERR_PASSWORD else "a scheme pdfium cannot open"
        return PdfOpenError("encrypted", why)
    return PdfOpenError("invalid", _ERR_NAMES.get(code or 0, f"pdfium error {code}"))


def encode_png(pixels: Any, width: int, height: int, stride: int) -> bytes:
    """RGB rows (``stride`` bytes apart in the buffer ``pixels``) as a PNG, filter type 0."""
    view = memoryview(pixels).cast("B")
    row = width * 3
    packer = zlib.compressobj(6)
    parts: list[bytes] = []
    for y in range(height):
        parts.append(packer.compress(b"\x00"))
        parts.append(packer.compress(view[y * stride : y * stride + row]))
    parts.append(packer.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour
    idat = b"".join(parts)
    chunks = [_chunk(b"IHDR", header), _chunk(b"IDAT", idat), _chunk(b"IEND", b"")]
    return b"".join([b"\x89PNG\r\n\x1a\n", *chunks])


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
