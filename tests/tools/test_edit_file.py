"""edit_file: exact matching on CRLF-normalised text, hints (nearest line, renamed replace_all),
misuse errors, non-UTF-8 bytes preserved, concurrent edits serialized, versions."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.tools.harness import Harness
from toolhub.core import ErrorKind
from toolhub.tools.edit_file import EditFile


def edit(h: Harness, path: str, old: str, new: str, **kw: object) -> object:
    args = {"path": path, "old_string": old, "new_string": new}
    args.update({k: v for k, v in kw.items() if k == "replace_all"})
    extra = {k: v for k, v in kw.items() if k != "replace_all"}
    return h.call(EditFile, args, **extra)


def test_replaces_unique_match_and_shows_context(harness: Harness, ws: Path) -> None:
    (ws / "m.py").write_text("".join(f"x{n} = {n}\n" for n in range(1, 11)))
    res = edit(harness, "m.py", "x5 = 5\n", "x5 = 50\n")
    assert res.output.status == "applied"
    assert "x5 = 50\n" in (ws / "m.py").read_text()
    snippet = res.output.snippet.split("\n")
    assert snippet[0].startswith("     2→") and snippet[-1].startswith("     8→")
    assert "     5→x5 = 50" in snippet


def test_crlf_file_keeps_crlf(harness: Harness, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    res = edit(harness, "w.txt", "alpha\nbeta", "ALPHA\nBETA")
    assert res.output.status == "applied"
    assert (ws / "w.txt").read_bytes() == b"ALPHA\r\nBETA\r\ngamma\r\n"


def test_no_final_newline_is_preserved(harness: Harness, ws: Path) -> None:
    (ws / "n.txt").write_bytes(b"one\ntwo")
    edit(harness, "n.txt", "two", "three")
    assert (ws / "n.txt").read_bytes() == b"one\nthree"


def test_non_utf8_bytes_survive(harness: Harness, ws: Path) -> None:
    original = "caf\xe9 = 1\nname = 'x'\n".encode("latin-1") + b"\xff\xfe tail\n"
    (ws / "l.txt").write_bytes(original)
    res = edit(harness, "l.txt", "name = 'x'", "name = 'y'")
    assert res.output.status == "applied"
    assert (ws / "l.txt").read_bytes() == original.replace(b"name = 'x'", b"name = 'y'")


def test_no_match_names_nearest_line(harness: Harness, ws: Path) -> None:
    (ws / "c.py").write_text("def alpha():\n    return compute_total(items)\n")
    res = edit(harness, "c.py", "return compute_totals(item)", "return 0")
    assert res.output.status == "no_match"
    assert "Nearest match: line 2:" in res.text
    assert "compute_total(items)" in res.text
    assert "`read_file`" in res.text


def test_no_match_legacy_has_no_nearest_hint(harness: Harness, ws: Path) -> None:
    (ws / "c.py").write_text("def alpha():\n    return compute_total(items)\n")
    res = edit(harness, "c.py", "return compute_totals(item)", "return 0", version="legacy-1")
    assert res.output.status == "no_match"
    assert "Nearest match" not in res.text


def test_no_match_explains_gutter_and_whitespace(harness: Harness, ws: Path) -> None:
    (ws / "g.py").write_text("if x:\n    y = 1\n")
    res = edit(harness, "g.py", "     2→    y = 1", "z")
    assert "gutter" in res.text
    res = edit(harness, "g.py", "if x:\n  y = 1", "z")
    assert "whitespace" in res.text
    assert (ws / "g.py").read_text() == "if x:\n    y = 1\n"


def test_multiple_matches_name_renamed_flag(harness: Harness, ws: Path) -> None:
    (ws / "d.txt").write_text("a\nfoo\nb\nfoo\nc\nfoo\n")
    res = edit(harness, "d.txt", "foo", "bar", param_names={"replace_all": "everywhere"})
    assert res.output.status == "multiple_matches"
    assert res.output.match_lines == [2, 4, 6]
    assert "`everywhere`" in res.text and "replace_all" not in res.text
    assert (ws / "d.txt").read_text().count("foo") == 3
    res = edit(harness, "d.txt", "foo", "bar", replace_all=True)
    assert res.output.replacements == 3
    assert "foo" not in (ws / "d.txt").read_text()


def test_identical_strings_are_invalid(harness: Harness, ws: Path) -> None:
    (ws / "s.txt").write_text("same\n")
    res = edit(harness, "s.txt", "same", "same", param_names={"old_string": "before"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "`before`" in res.error.detail


def test_missing_file_and_creation_with_empty_old(harness: Harness, ws: Path) -> None:
    res = edit(harness, "new/file.txt", "x", "y")
    assert res.output.status == "not_found"
    res = edit(harness, "new/file.txt", "", "hello\n")
    assert res.output.status == "created"
    assert (ws / "new/file.txt").read_text() == "hello\n"
    res = edit(harness, "new/file.txt", "", "clobber")
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert (ws / "new/file.txt").read_text() == "hello\n"


def test_concurrent_edits_of_one_file_all_land(harness: Harness, ws: Path) -> None:
    count = 24
    (ws / "c.txt").write_text("".join(f"slot{n}\n" for n in range(count)))
    barrier = threading.Barrier(count)
    errors: list[object] = []

    def worker(n: int) -> None:
        barrier.wait()
        res = edit(harness, "c.txt", f"slot{n}\n", f"done{n}\n")
        if res.error is not None or res.output.status != "applied":
            errors.append(res.error or res.output)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (ws / "c.txt").read_text() == "".join(f"done{n}\n" for n in range(count))


def test_escaping_symlink_is_refused(harness: Harness, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "o.txt"
    outside.write_text("secret = 1\n")
    (ws / "l.txt").symlink_to(outside)
    res = edit(harness, "l.txt", "secret = 1", "secret = 2")
    assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED
    assert outside.read_text() == "secret = 1\n"
