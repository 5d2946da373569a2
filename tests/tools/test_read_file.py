"""read_file: windows, numbering (both versions), caps with renamed hints, binary, images,
empty and past-end notes, non-UTF-8 text, and bounded memory on a 10 MB file."""

from __future__ import annotations

import base64
import tracemalloc
from pathlib import Path

from tests.tools.harness import Harness
from toolhub.core import ErrorKind
from toolhub.tools.read_file import ReadFile, ReadFileParams

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def lines_file(root: Path, name: str, count: int) -> Path:
    path = root / name
    path.write_text("".join(f"line {n}\n" for n in range(1, count + 1)))
    return path


def test_numbers_first_and_every_tenth_line(harness: Harness, ws: Path) -> None:
    lines_file(ws, "a.txt", 25)
    res = harness.call(ReadFile, {"path": "a.txt"})
    rows = res.output.content.split("\n")
    assert len(rows) == 25
    assert rows[0] == "     1→line 1"
    assert rows[1] == "       line 2"
    assert rows[9] == "    10→line 10"
    assert rows[19] == "    20→line 20"
    assert all(r[6] in "→ " for r in rows)
    assert not res.output.truncated


def test_legacy_numbers_every_line(harness: Harness, ws: Path) -> None:
    lines_file(ws, "a.txt", 12)
    res = harness.call(ReadFile, {"path": "a.txt"}, version="legacy-1")
    rows = res.output.content.split("\n")
    assert rows[1] == "     2→line 2"
    assert all("→" in r for r in rows)


def test_offset_limit_window_and_first_line_numbered(harness: Harness, ws: Path) -> None:
    lines_file(ws, "a.txt", 100)
    res = harness.call(ReadFile, {"path": "a.txt", "offset": 43, "limit": 5})
    rows = res.output.content.split("\n")
    assert [r.split("line ")[1] for r in rows] == ["43", "44", "45", "46", "47"]
    assert rows[0].startswith("    43→")
    assert res.output.start_line == 43 and res.output.end_line == 47
    assert res.output.total_lines == 100
    assert res.output.truncated


def test_negative_offset_counts_from_end(harness: Harness, ws: Path) -> None:
    lines_file(ws, "a.txt", 50)
    res = harness.call(ReadFile, {"path": "a.txt", "offset": -3})
    assert res.output.content.split("\n")[-1].endswith("line 50")
    assert res.output.start_line == 48
    assert res.output.content.count("line") == 3


def test_line_cap_hint_names_renamed_params(harness: Harness, ws: Path) -> None:
    harness.set_params(ReadFileParams(max_lines=10))
    lines_file(ws, "a.txt", 30)
    res = harness.call(
        ReadFile, {"path": "a.txt"}, param_names={"offset": "start_at", "limit": "max_rows"}
    )
    assert res.output.end_line == 10
    assert "`start_at`=11" in res.text
    assert "`max_rows`" in res.text
    assert "of 30" in res.text


def test_byte_cap_cuts_window_and_says_so(harness: Harness, ws: Path) -> None:
    harness.set_params(ReadFileParams(max_bytes=1000))
    (ws / "wide.txt").write_text("".join("x" * 90 + "\n" for _ in range(100)))
    res = harness.call(ReadFile, {"path": "wide.txt"})
    assert len(res.output.content.encode()) <= 1000
    assert res.output.truncated
    assert "1000-byte cap" in res.text
    assert res.output.total_lines == 100


def test_long_line_is_clipped(harness: Harness, ws: Path) -> None:
    harness.set_params(ReadFileParams(max_line_chars=100))
    (ws / "min.js").write_text("a" * 5000 + "\nend\n")
    res = harness.call(ReadFile, {"path": "min.js"})
    first, second = res.output.content.split("\n")
    assert "[line truncated, 5000 bytes]" in first
    assert len(first) < 200
    assert second.endswith("end")


def test_empty_and_past_end_notes(harness: Harness, ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    res = harness.call(ReadFile, {"path": "empty.txt"})
    assert res.output.status == "empty"
    assert "empty" in res.text
    lines_file(ws, "a.txt", 3)
    res = harness.call(ReadFile, {"path": "a.txt", "offset": 10}, param_names={"offset": "from"})
    assert res.output.status == "past_end"
    assert "has 3 lines" in res.text and "`from`" in res.text


def test_no_final_newline_last_line_kept(harness: Harness, ws: Path) -> None:
    (ws / "n.txt").write_bytes(b"one\ntwo")
    res = harness.call(ReadFile, {"path": "n.txt"})
    assert res.output.content.endswith("two")
    assert res.output.total_lines == 2


def test_crlf_is_not_shown(harness: Harness, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a\r\nb\r\n")
    res = harness.call(ReadFile, {"path": "w.txt"})
    assert "\r" not in res.output.content


def test_non_utf8_text_is_readable(harness: Harness, ws: Path) -> None:
    (ws / "latin.txt").write_bytes("café\nnaïve\n".encode("latin-1"))
    res = harness.call(ReadFile, {"path": "latin.txt"})
    assert res.output.status == "ok"
    assert "caf\ufffd" in res.output.content


def test_binary_refused(harness: Harness, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    res = harness.call(ReadFile, {"path": "blob.bin"})
    assert res.output.status == "binary"
    assert res.output.content == ""
    assert "binary" in res.text


def test_image_comes_back_as_content_block(harness: Harness, ws: Path) -> None:
    (ws / "dot.png").write_bytes(PNG)
    res = harness.call(ReadFile, {"path": "dot.png"})
    assert res.output.status == "image"
    (block,) = res.output.content_blocks()
    assert block.type == "image" and block.mime_type == "image/png"
    assert base64.b64decode(block.data) == PNG


def test_not_found_suggests_close_names_and_directory_points_to_lister(
    harness: Harness, ws: Path
) -> None:
    (ws / "README.md").write_text("hi\n")
    res = harness.call(ReadFile, {"path": "README.mdx"})
    assert res.output.status == "not_found"
    assert "`README.md`" in res.text
    (ws / "src").mkdir()
    res = harness.call(ReadFile, {"path": "src"})
    assert res.output.status == "is_directory"
    assert "`list_dir`" in res.text


def test_outside_workspace_is_permission_denied(harness: Harness, ws: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("top secret\n")
    for path in ["../secret.txt", str(tmp_path / "secret.txt")]:
        res = harness.call(ReadFile, {"path": path})
        assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED


def test_ten_megabyte_file_is_read_with_bounded_memory(harness: Harness, ws: Path) -> None:
    big = ws / "big.log"
    with open(big, "w") as fh:
        row = "0123456789" * 9 + "\n"
        for n in range(110_000):
            fh.write(f"{n:08d} {row}")
    assert big.stat().st_size > 10_000_000
    tracemalloc.start()
    try:
        res = harness.call(ReadFile, {"path": "big.log", "offset": -5})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.output.total_lines == 110_000
    assert res.output.content.split("\n")[-1].strip().startswith("110000→00109999")
    assert peak < 2_000_000, peak


def test_special_files_are_not_opened(harness: Harness, ws: Path) -> None:
    import os

    from toolhub.tools.edit_file import EditFile

    os.mkfifo(ws / "pipe")
    res = harness.call(ReadFile, {"path": "pipe"})
    assert res.output.status == "binary" and "not a regular file" in res.text
    res = harness.call(EditFile, {"path": "pipe", "old_string": "a", "new_string": "b"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
