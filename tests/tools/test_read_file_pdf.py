"""read_file on PDFs (issue 17): pages as text, textless pages as PNG content blocks, ``pages``
parsing and its refusals, the summary without ``pages``, the caps (text, render size, image
bytes), corrupt and encrypted documents, a 500-page document read in bounded time, memory and
I/O, confinement (outside paths, symlinks, a swap after the check), the legacy version, the
schema (strict mode: ``null`` is absent), and the call through both executors.

The PDFs are written by hand (``tests/tools/pdfs.py``): text pages, a textless page (a filled
rectangle), a truly encrypted one.
"""

from __future__ import annotations

import base64
import io
import os
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import pypdfium2
import pytest

from tests.contract.conftest import EXECUTORS
from tests.tools.harness import Harness
from tests.tools.pdfs import BLUE, MIXED, build_pdf, png_info
from toolhub import Session
from toolhub.backends.workspace import Workspace
from toolhub.core import ErrorKind
from toolhub.tools.read_file import ReadFile, ReadFileParams
from toolhub.tools.read_pdf import parse_pages, ranges


@pytest.fixture
def mixed(ws: Path) -> Path:
    path = ws / "doc.pdf"
    path.write_bytes(build_pdf(MIXED))
    return path


# -- pages: text and images -------------------------------------------------------------------


def test_pages_with_text_come_back_as_text(harness: Harness, mixed: Path) -> None:
    res = harness.call(ReadFile, {"path": "doc.pdf", "pages": "1,3"})
    out = res.output
    assert out.status == "pdf" and out.total_pages == 3 and out.content == ""
    assert [(p.number, p.kind) for p in out.pages] == [(1, "text"), (3, "text")]
    assert out.pages[0].text == "Hello page one\nsecond line"
    assert out.pages[1].text == "Third (page) text"
    assert "--- page 1 ---\nHello page one\nsecond line" in res.text
    assert "[doc.pdf: PDF, 3 pages; showing pages 1,3]" in res.text
    assert out.content_blocks() == []


def test_a_page_without_text_is_a_png_content_block(harness: Harness, mixed: Path) -> None:
    res = harness.call(ReadFile, {"path": "doc.pdf", "pages": "1-3"})
    kinds = [p.kind for p in res.output.pages]
    assert kinds == ["text", "image", "text"]
    (block,) = res.outcome.blocks
    assert block.type == "image" and block.mime_type == "image/png"
    assert block.path == "doc.pdf#page=2"
    width, height, centre = png_info(base64.b64decode(block.data))
    assert max(width, height) == 1568  # the default cap on the longest side
    assert (width, height) == (res.output.pages[1].image.width, res.output.pages[1].image.height)
    assert all(abs(a - b) <= 2 for a, b in zip(centre, BLUE, strict=True))
    assert "--- page 2: no text layer; rendered as image 1 of 1 ---" in res.text


def test_render_size_is_capped_even_for_a_huge_page(harness: Harness, ws: Path) -> None:
    (ws / "poster.pdf").write_bytes(build_pdf([None], size=(14400, 14400)))
    res = harness.call(ReadFile, {"path": "poster.pdf", "pages": "1"})
    image = res.output.pages[0].image
    assert (image.width, image.height) == (1568, 1568)
    harness.set_params(ReadFileParams(max_pdf_render_px=200))
    res = harness.call(ReadFile, {"path": "poster.pdf", "pages": "1"})
    assert max(res.output.pages[0].image.width, res.output.pages[0].image.height) <= 200


def test_an_image_over_the_byte_cap_is_rendered_smaller_or_not_at_all(
    harness: Harness, mixed: Path
) -> None:
    full = harness.call(ReadFile, {"path": "doc.pdf", "pages": "2"}).output.pages[0].image
    size = len(base64.b64decode(full.data))
    harness.set_params(ReadFileParams(max_image_bytes=size // 3))
    smaller = harness.call(ReadFile, {"path": "doc.pdf", "pages": "2"}).output.pages[0]
    assert smaller.kind == "image" and smaller.image.width < full.width
    assert len(base64.b64decode(smaller.image.data)) <= size // 3
    harness.set_params(ReadFileParams(max_image_bytes=10))
    res = harness.call(ReadFile, {"path": "doc.pdf", "pages": "2"})
    assert res.output.pages[0].kind == "no_text" and "within 10 bytes" in res.text
    assert res.outcome.blocks == ()


def test_images_over_the_call_budget_wait_for_the_next_call(harness: Harness, ws: Path) -> None:
    (ws / "scans.pdf").write_bytes(build_pdf([None, None, None]))
    one = harness.call(ReadFile, {"path": "scans.pdf", "pages": "1"}).output.pages[0].image
    size = len(base64.b64decode(one.data))
    harness.set_params(ReadFileParams(max_pdf_render_bytes=size * 3 // 2))
    res = harness.call(ReadFile, {"path": "scans.pdf", "pages": "1-3"}, param_names={"pages": "pp"})
    assert [p.number for p in res.output.pages] == [1]
    assert res.output.pages[0].image.width == one.width  # full size, not squeezed
    assert res.output.truncated
    assert f"cut at the {size * 3 // 2}-byte cap on images" in res.text
    assert '`pp`="2-3"' in res.text


def test_text_caps_per_page_and_per_call(harness: Harness, ws: Path) -> None:
    (ws / "long.pdf").write_bytes(build_pdf(["word " * 300, "more " * 300, "last " * 300]))
    harness.set_params(ReadFileParams(max_pdf_page_chars=100))
    res = harness.call(ReadFile, {"path": "long.pdf", "pages": "1"})
    page = res.output.pages[0]
    assert page.truncated and len(page.text) <= 100 and page.chars >= 1500
    assert f"[page text cut: {len(page.text)} of {page.chars} characters shown]" in res.text
    harness.set_params(ReadFileParams(max_bytes=2000))
    res = harness.call(ReadFile, {"path": "long.pdf", "pages": "1-3"})
    assert [p.number for p in res.output.pages] == [1]
    assert "cut at the 2000-character cap on text" in res.text and '"2-3"' in res.text
    harness.set_params(ReadFileParams(max_bytes=1000))
    res = harness.call(ReadFile, {"path": "long.pdf", "pages": "2"})
    assert len(res.output.pages[0].text) == 1000 and res.output.pages[0].truncated


# -- the pages argument -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "pages"),
    [
        ("3", [3]),
        ("1-3,7", [1, 2, 3, 7]),
        (" 2 - 4 , 2,4 ", [2, 3, 4]),
        ("9,1", [1, 9]),
        ("5-5", [5]),
        ("1-20", list(range(1, 21))),
    ],
)
def test_valid_page_specs(spec: str, pages: list[int]) -> None:
    assert parse_pages(spec, max_pages=20) == pages


def test_ranges_write_pages_back() -> None:
    assert ranges([1, 2, 3, 7, 9, 10]) == "1-3,7,9-10"
    assert ranges([4]) == "4" and ranges([]) == ""


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("abc", "not a page"),
        ("1-", "not a page"),
        ("-3", "not a page"),
        ("1--3", "not a page"),
        ("1,,2", "not a page"),
        ("1.5", "not a page"),
        ("\u0663", "not a page"),  # an Arabic-Indic digit: only 0-9 are page numbers
        ("0", "no page 0"),
        ("0-2", "no page 0"),
        ("5-3", "reversed range `5-3`"),
        ("1-21", "asks for 21 pages; at most 20"),
        ("1-10,11-21", "asks for 21 pages; at most 20"),
        ("1-999999999", "asks for 999999999 pages"),
        ("1," * 150, "longer than 200 characters"),
    ],
)
def test_invalid_page_specs_are_refused_naming_the_client_param(
    harness: Harness, mixed: Path, spec: str, says: str
) -> None:
    started = time.monotonic()
    res = harness.call(ReadFile, {"path": "doc.pdf", "pages": spec}, param_names={"pages": "pp"})
    assert time.monotonic() - started < 10  # refused up front: walking the pages takes minutes
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert says in res.error.detail and "`pp`" in res.error.detail


def test_pages_beyond_the_end(harness: Harness, mixed: Path) -> None:
    res = harness.call(ReadFile, {"path": "doc.pdf", "pages": "7-9"}, param_names={"pages": "pp"})
    assert res.output.status == "past_end" and res.output.total_pages == 3
    assert res.text == 'doc.pdf has 3 pages; `pp` "7-9" is past the end.'
    res = harness.call(ReadFile, {"path": "doc.pdf", "pages": "3-5"})
    assert [p.number for p in res.output.pages] == [3]
    assert "[The document has 3 pages; pages 4-5 do not exist.]" in res.text


def test_pages_of_a_file_that_is_not_a_pdf_is_misuse(harness: Harness, ws: Path) -> None:
    (ws / "notes.txt").write_text("one\ntwo\n")
    res = harness.call(ReadFile, {"path": "notes.txt", "pages": "1"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "not one" in res.error.detail and "`offset`" in res.error.detail


def test_blank_or_null_pages_is_absent(harness: Harness, mixed: Path) -> None:
    for value in ("", "  ", None):
        res = harness.call(ReadFile, {"path": "doc.pdf", "pages": value})
        assert res.output.status == "pdf" and res.outcome.blocks == ()


def test_detected_by_content_not_by_name(harness: Harness, ws: Path) -> None:
    (ws / "report.txt").write_bytes(build_pdf(["inside a .txt"]))
    res = harness.call(ReadFile, {"path": "report.txt"})
    assert res.output.status == "pdf" and res.output.pages[0].text == "inside a .txt"
    (ws / "fake.pdf").write_text("just text\n")
    assert harness.call(ReadFile, {"path": "fake.pdf"}).output.content.endswith("just text")


def test_line_arguments_on_a_pdf_are_noted(harness: Harness, mixed: Path) -> None:
    res = harness.call(ReadFile, {"path": "doc.pdf", "offset": 5, "limit": 10})
    assert res.output.status == "pdf"
    assert "(`offset`/`limit` count lines of text files; a PDF is read by pages.)" in res.text


# -- without pages: the summary ---------------------------------------------------------------


def test_summary_gives_the_count_the_text_and_a_hint_with_client_names(
    harness: Harness, mixed: Path
) -> None:
    res = harness.call(
        ReadFile, {"path": "doc.pdf"}, param_names={"pages": "page_range", "path": "file"}
    )
    out = res.output
    assert out.status == "pdf" and out.total_pages == 3
    assert [p.kind for p in out.pages] == ["text", "no_text", "text"]
    assert res.outcome.blocks == ()  # the summary never renders
    assert "--- page 2: no text layer ---" in res.text
    assert '[Page 2 has no text layer: pass `page_range`="2" to see it as an image.]' in res.text


def test_summary_of_a_long_pdf_stops_at_the_page_cap_and_says_where_to_go_on(
    harness: Harness, ws: Path
) -> None:
    (ws / "book.pdf").write_bytes(build_pdf([f"chapter {n}" for n in range(1, 31)]))
    res = harness.call(ReadFile, {"path": "book.pdf"}, param_names={"pages": "pp"})
    assert [p.number for p in res.output.pages] == list(range(1, 21))
    assert res.output.truncated
    assert "[book.pdf: PDF, 30 pages; showing pages 1-20]" in res.text
    assert '[Pages 21-30 not shown. To read on, call `read_file` with `pp`="21-30"' in res.text


# -- documents that cannot be read ------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.7\nthis is not a PDF at all\n",
        b"%PDF-",
        build_pdf(MIXED)[:60],  # cut off after the first object
    ],
    ids=["garbage", "magic-only", "truncated"],
)
def test_a_corrupt_pdf_is_a_clear_answer(harness: Harness, ws: Path, data: bytes) -> None:
    (ws / "bad.pdf").write_bytes(data)
    for args in ({"path": "bad.pdf"}, {"path": "bad.pdf", "pages": "1"}):
        res = harness.call(ReadFile, args)
        assert res.output.status == "pdf_invalid"
        assert res.text.startswith("bad.pdf starts like a PDF but cannot be opened (")
        assert "damaged or truncated" in res.text


def test_an_encrypted_pdf_is_a_clear_answer(harness: Harness, ws: Path) -> None:
    data = build_pdf(["the secret"], user_password="hunter2")
    with pypdfium2.PdfDocument(data, password="hunter2") as doc:  # a real encrypted PDF
        assert doc[0].get_textpage().get_text_range() == "the secret"
    (ws / "locked.pdf").write_bytes(data)
    res = harness.call(ReadFile, {"path": "locked.pdf", "pages": "1"})
    assert res.output.status == "pdf_encrypted"
    assert "encrypted PDF (it needs a password)" in res.text and "secret" not in res.text


# -- a large document: bounded time, memory and reads -----------------------------------------


class _Counting(io.BufferedReader):
    """A file that counts the bytes read from it: what pdfium asked for."""

    read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        _Counting.read_bytes += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        count = super().readinto(buffer)
        _Counting.read_bytes += count
        return count


def test_three_pages_of_a_500_page_pdf_are_fast_and_bounded(
    harness: Harness, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filler = "lorem ipsum dolor sit amet " * 600  # ~16 KB of content per page
    (ws / "big.pdf").write_bytes(build_pdf([f"page {n} {filler}" for n in range(1, 501)]))
    size = (ws / "big.pdf").stat().st_size
    assert size > 8_000_000
    original = Workspace.open_read

    def counting_open(self: Workspace, path: Path) -> BinaryIO:
        handle = original(self, path)
        fd = os.dup(handle.fileno())
        handle.close()
        return _Counting(io.FileIO(fd, "rb"))

    monkeypatch.setattr(Workspace, "open_read", counting_open)
    _Counting.read_bytes = 0
    started = time.monotonic()
    tracemalloc.start()
    try:
        res = harness.call(ReadFile, {"path": "big.pdf", "pages": "1,250,500"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    assert res.output.total_pages == 500
    assert [p.text.split(" lorem")[0] for p in res.output.pages] == [
        "page 1",
        "page 250",
        "page 500",
    ]
    assert elapsed < 3.0, elapsed
    assert peak < 2_000_000, peak
    assert _Counting.read_bytes < size // 10, (_Counting.read_bytes, size)
    _Counting.read_bytes = 0
    res = harness.call(ReadFile, {"path": "big.pdf"})  # the summary reads 20 pages at most
    assert len(res.output.pages) <= 20 and _Counting.read_bytes < size // 10


def test_concurrent_calls_share_pdfium_safely(harness: Harness, mixed: Path) -> None:
    """pdfium is not thread-safe; calls on worker threads take turns (a crash would end the
    test process, a race would garble text or pixels)."""

    def read(_: int) -> tuple[list[str], tuple[int, int, int]]:
        res = harness.call(ReadFile, {"path": "doc.pdf", "pages": "1-3"})
        (block,) = res.outcome.blocks
        return [p.text for p in res.output.pages], png_info(base64.b64decode(block.data))[2]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(read, range(32)))
    assert all(r == results[0] for r in results)
    assert results[0][0][0] == "Hello page one\nsecond line"


# -- confinement ------------------------------------------------------------------------------


def test_a_pdf_outside_the_workspace_is_refused(harness: Harness, ws: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.pdf").write_bytes(build_pdf(["top secret"]))
    (ws / "link.pdf").symlink_to(tmp_path / "secret.pdf")
    for path in ["../secret.pdf", str(tmp_path / "secret.pdf"), "link.pdf"]:
        for extra in ({}, {"pages": "1"}):
            res = harness.call(ReadFile, {"path": path, **extra})
            assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED
            assert "top secret" not in res.error.detail


def test_a_symlink_inside_the_workspace_is_followed(harness: Harness, mixed: Path) -> None:
    (mixed.parent / "alias.pdf").symlink_to(mixed)
    res = harness.call(ReadFile, {"path": "alias.pdf", "pages": "1"})
    assert res.output.path == "doc.pdf" and res.output.pages[0].kind == "text"


def test_a_directory_swapped_for_a_link_after_the_check_is_refused(
    harness: Harness, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "doc.pdf").write_bytes(build_pdf(["inside"]))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "doc.pdf").write_bytes(build_pdf(["outside secret"]))
    original = Workspace.resolve

    def resolve_then_swap(self: Workspace, path: Any, *, what: str = "path") -> Path:
        real = original(self, path, what=what)
        (ws / "d").rename(ws / "d-old")
        (ws / "d").symlink_to(tmp_path / "outside")
        return real

    monkeypatch.setattr(Workspace, "resolve", resolve_then_swap)
    res = harness.call(ReadFile, {"path": "d/doc.pdf", "pages": "1"})
    assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED
    assert "outside secret" not in res.error.detail


# -- versions and schema ----------------------------------------------------------------------


def test_legacy_version_has_no_pdf_pages(harness: Harness, mixed: Path) -> None:
    res = harness.call(ReadFile, {"path": "doc.pdf", "pages": "1"}, version="legacy-1")
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "legacy-1" in res.error.detail
    res = harness.call(ReadFile, {"path": "doc.pdf"}, version="legacy-1")
    assert res.output.status != "pdf" and res.output.pages == []


def test_schema_describes_pages_and_strict_mode_takes_null_as_absent(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "doc.pdf").write_bytes(build_pdf(MIXED))
    config = {"tools": [{"id": "Main:read_file", "params": {"max_pdf_pages": 7}}]}
    with Session.embedded(config, tmp_path / "ws", state_dir=tmp_path / "state") as session:
        (plain,) = session.definitions()
        pages = plain["function"]["parameters"]["properties"]["pages"]
        assert "1-3,7" in pages["description"] and "at most 7 per call" in pages["description"]
        assert "pages" not in plain["function"]["parameters"].get("required", [])
        assert "at most 7 pages per call" in plain["function"]["description"]
        (strict,) = session.definitions(strict=True)
        held = strict["function"]["parameters"]
        assert "pages" in held["required"]
        assert held["properties"]["pages"]["type"] == ["string", "null"]
        nulls = {"path": "doc.pdf", "offset": None, "limit": None, "pages": None}
        result = session.call_sync("read_file", nulls)
        assert not result.is_error, result.prompt_text
        assert "[doc.pdf: PDF, 3 pages; showing pages 1-3]" in result.prompt_text
        result = session.call_sync("read_file", {"path": "doc.pdf", "pages": "1-8"})
        assert result.is_error and "at most 7 per call" in result.error.detail


# -- through both executors -------------------------------------------------------------------


@pytest.mark.parametrize("executor", list(EXECUTORS))
def test_pages_through_each_executor(
    executor: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "doc.pdf").write_bytes(build_pdf(MIXED))
    config = {
        "tools": [
            {"id": "Main:read_file", "name": "view", "rename": {"path": "file", "pages": "pp"}}
        ]
    }
    session = EXECUTORS[executor](tmp_path, request)(config)
    try:
        (definition,) = session.definitions("anthropic")
        assert "pp" in definition["input_schema"]["properties"]
        assert "`pp`" in definition["description"]
        result = session.call_sync("view", {"file": "doc.pdf", "pp": "1-2"})
        assert not result.is_error, result.prompt_text
        assert "Hello page one" in result.prompt_text
        assert "rendered as image 1 of 1" in result.prompt_text
        (block,) = result.content
        assert block.mime_type == "image/png" and block.path == "doc.pdf#page=2"
        assert png_info(base64.b64decode(block.data))[2] == pytest.approx(BLUE, abs=2)
        summary = session.call_sync("view", {"file": "doc.pdf"})
        assert '`pp`="2"' in summary.prompt_text and summary.content == ()
        bad = session.call_sync("view", {"file": "doc.pdf", "pp": "3-1"})
        assert bad.is_error and bad.error.kind == "invalid_arguments"
        assert "`pp`" in bad.error.detail
    finally:
        session.close()
