"""The Hashline namespace (issue 17): the documented hash scheme, read/edit/grep happy paths,
stale anchors refused with nothing written, every malformed edit refused, confinement, plan
mode, atomic multi-edits, hints naming the client's own argument names."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import Harness, Result, snapshot
from toolhub.core import ErrorKind
from toolhub.errors import ErrorCode
from toolhub.tools.hashline import HashlineEdit, HashlineRead
from toolhub.tools.hashline_grep import HashlineGrep
from toolhub.tools.hashline_scheme import HashlineParams
from toolhub.tools.plan import EnterPlanMode

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def anchors(h: Harness, path: str) -> dict[int, str]:
    res = h.call(HashlineRead, {"path": path})
    return {line.line: f"{line.line}:{line.hash}" for line in res.output.lines}


def edit(h: Harness, path: str, *edits: dict[str, Any], **kw: Any) -> Result:
    return h.call(HashlineEdit, {"path": path, "edits": list(edits)}, **kw)


def spec_hash(data: bytes, length: int) -> str:
    """The documented encoding, written independently: top 5*length bits in base 32."""
    bits = f"{int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), 'big'):064b}"
    return "".join(ALPHABET[int(bits[5 * i : 5 * i + 5], 2)] for i in range(length))


def lines_file(ws: Path, name: str, count: int) -> Path:
    path = ws / name
    path.write_text("".join(f"l{n}\n" for n in range(1, count + 1)))
    return path


# -- the scheme -----------------------------------------------------------------------------------


def test_hashes_follow_the_documented_scheme(harness: Harness, ws: Path) -> None:
    (ws / "s.txt").write_bytes(b"alpha\r\nbeta\r\n}")
    harness.set_params(HashlineParams(scheme="content_only", hash_len=4))
    res = harness.call(HashlineRead, {"path": "s.txt"})
    assert [(x.line, x.text) for x in res.output.lines] == [(1, "alpha"), (2, "beta"), (3, "}")]
    assert [x.hash for x in res.output.lines] == [
        spec_hash(b, 4) for b in (b"alpha", b"beta", b"}")
    ]
    harness.set_params(HashlineParams(scheme="chunk", hash_len=3, chunk_size=2))
    res = harness.call(HashlineRead, {"path": "s.txt"})
    assert [x.hash for x in res.output.lines] == [
        spec_hash(b"alpha\nbeta\x000", 3),
        spec_hash(b"alpha\nbeta\x001", 3),
        spec_hash(b"}\x000", 3),
    ]
    first = spec_hash(b"alpha\nbeta\x000", 3)
    assert res.text.split("\n")[0] == f"1:{first}|alpha"


def test_chunk_scheme_refuses_a_repeated_line_pushed_down(harness: Harness, ws: Path) -> None:
    """content_only cannot tell one `}` from another at the same number; chunk can."""
    for scheme, expected in (("content_only", "applied"), ("chunk", "stale")):
        (ws / "r.txt").write_text("}\n}\n}\nend\n")
        harness.set_params(HashlineParams(scheme=scheme))
        second = anchors(harness, "r.txt")[2]
        (ws / "r.txt").write_text("start\n}\n}\n}\nend\n")
        res = edit(harness, "r.txt", {"op": "replace", "anchor": second, "content": "]"})
        assert res.output.status == expected, scheme


# -- hashline_read --------------------------------------------------------------------------------


def test_read_pages_with_the_clients_offset_name(harness: Harness, ws: Path) -> None:
    lines_file(ws, "p.txt", 30)
    res = harness.call(HashlineRead, {"path": "p.txt", "offset": 5, "limit": 3})
    assert [x.line for x in res.output.lines] == [5, 6, 7]
    assert res.output.next_offset == 8 and res.output.total_lines == 30
    res = harness.call(
        HashlineRead, {"path": "p.txt", "limit": 3}, param_names={"offset": "start_line"}
    )
    assert res.text.endswith("[Lines 1-3 of 30. Continue with `start_line`: 4.]")
    assert res.text.split("\n")[0].startswith("1:") and "|l1" in res.text
    res = harness.call(HashlineRead, {"path": "p.txt", "offset": 31})
    assert res.output.status == "past_end" and "30 lines" in res.text


@pytest.mark.parametrize(
    ("setup", "status"),
    [
        (lambda ws: None, "not_found"),
        (lambda ws: (ws / "f").mkdir(), "is_directory"),
        (lambda ws: (ws / "f").write_bytes(b""), "empty"),
        (lambda ws: (ws / "f").write_bytes(b"\x89PNG\x00\x00"), "binary"),
        (lambda ws: os.mkfifo(ws / "f"), "binary"),
    ],
)
def test_read_outcomes(
    harness: Harness, ws: Path, setup: Callable[[Path], None], status: str
) -> None:
    setup(ws)
    res = harness.call(HashlineRead, {"path": "f"})
    assert res.output.status == status and res.output.lines == []
    assert res.text


# -- hashline_edit: happy paths -------------------------------------------------------------------


def test_replace_a_range_and_get_fresh_anchors(harness: Harness, ws: Path) -> None:
    lines_file(ws, "m.txt", 20)
    a = anchors(harness, "m.txt")
    res = edit(
        harness, "m.txt", {"op": "replace", "anchor": a[3], "end_anchor": a[5], "content": "X"}
    )
    assert res.output.status == "applied"
    assert (ws / "m.txt").read_text().split("\n")[:5] == ["l1", "l2", "X", "l6", "l7"]
    fresh = anchors(harness, "m.txt")
    assert f"{fresh[3]}|X" in res.output.snippet
    assert res.output.lines_before == 20 and res.output.lines_after == 18
    assert "moved (-2 lines)" in res.text
    again = edit(harness, "m.txt", {"op": "replace", "anchor": fresh[3], "content": "Y"})
    assert again.output.status == "applied"


def test_several_edits_apply_together_against_the_same_lines(harness: Harness, ws: Path) -> None:
    edits: Callable[[dict[int, str]], list[dict[str, Any]]] = lambda a: [  # noqa: E731
        {"op": "insert_after", "anchor": "0", "content": "top"},
        {"op": "replace", "anchor": a[3], "end_anchor": a[4], "content": "THREE\n"},
        {"op": "delete", "anchor": a[6]},
        {"op": "insert_after", "anchor": a[8], "content": "after8"},
        {"op": "insert_after", "anchor": "EOF", "content": "tail"},
    ]
    expected = ["top", "l1", "l2", "THREE", "l5", "l7", "l8", "after8", "l9", "l10", "tail"]
    for order in (1, -1):
        lines_file(ws, "t.txt", 10)
        res = edit(harness, "t.txt", *edits(anchors(harness, "t.txt"))[::order])
        assert res.output.status == "applied"
        assert (ws / "t.txt").read_text() == "\n".join(expected) + "\n"


def test_create_a_file_with_insert_after_zero(harness: Harness, ws: Path) -> None:
    res = edit(harness, "new/a.py", {"op": "insert_after", "anchor": "0", "content": "x = 1\n"})
    assert res.output.status == "created" and (ws / "new/a.py").read_text() == "x = 1\n"
    res = edit(harness, "nope.py", {"op": "replace", "anchor": "1:abc", "content": "y"})
    assert res.output.status == "not_found" and not (ws / "nope.py").exists()


def test_line_endings_final_newline_and_other_bytes_are_kept(harness: Harness, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"caf\xe9\r\nb\r\nc")
    a = anchors(harness, "w.txt")
    res = edit(
        harness,
        "w.txt",
        {"op": "replace", "anchor": a[2], "content": "B1\nB2"},
        {"op": "insert_after", "anchor": a[3], "content": "d"},
    )
    assert res.output.status == "applied"
    assert (ws / "w.txt").read_bytes() == b"caf\xe9\r\nB1\r\nB2\r\nc\r\nd"


def test_an_edit_that_changes_nothing_writes_nothing(harness: Harness, ws: Path) -> None:
    path = lines_file(ws, "u.txt", 3)
    before = path.stat().st_ino
    res = edit(
        harness, "u.txt", {"op": "replace", "anchor": anchors(harness, "u.txt")[2], "content": "l2"}
    )
    assert res.output.status == "unchanged" and path.stat().st_ino == before


def test_pasted_anchor_tail_and_edits_as_json_text_are_forgiven(harness: Harness, ws: Path) -> None:
    lines_file(ws, "j.txt", 3)
    a = anchors(harness, "j.txt")
    text = json.dumps([{"op": "replace", "anchor": f" `{a[2].upper()}|l2` ", "content": "two"}])
    res = harness.call(HashlineEdit, {"path": "j.txt", "edits": text})
    assert res.output.status == "applied" and (ws / "j.txt").read_text() == "l1\ntwo\nl3\n"


def test_concurrent_edits_of_one_file_all_land(harness: Harness, ws: Path) -> None:
    (ws / "c.txt").write_text("")

    def append(tag: str) -> None:
        for n in range(10):
            edit(harness, "c.txt", {"op": "insert_after", "anchor": "EOF", "content": f"{tag}{n}"})

    threads = [threading.Thread(target=append, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted((ws / "c.txt").read_text().split()) == sorted(
        f"{t}{n}" for t in "ab" for n in range(10)
    )


# -- hashline_edit: refusals ----------------------------------------------------------------------


def test_a_stale_anchor_is_refused_with_the_current_lines(harness: Harness, ws: Path) -> None:
    lines_file(ws, "s.txt", 12)
    a = anchors(harness, "s.txt")  # chunks of 8: lines 1-8 and 9-12
    (ws / "s.txt").write_text((ws / "s.txt").read_text().replace("l10\n", "changed\n"))
    before = snapshot(ws)
    res = edit(
        harness,
        "s.txt",
        {"op": "replace", "anchor": a[2], "content": "fine"},
        {"op": "delete", "anchor": a[10]},
        {"op": "delete", "anchor": a[12].replace("12:", "40:")},
        param_names={"edits": "changes"},
    )
    assert res.output.status == "stale" and snapshot(ws) == before
    fresh = anchors(harness, "s.txt")
    assert f"changes[1].anchor `{a[10]}`: line 10 is now `{fresh[10]}|changed`" in res.text
    assert "changes[2].anchor" in res.text and "line 40 does not exist" in res.text
    assert "changes[0]" not in res.text
    assert [f"{fresh[n]}|" in res.text for n in range(6, 13)] == [False] + [True] * 6
    assert "Nothing was written" in res.text and "`read_file`" in res.text


def test_an_edit_in_a_chunk_makes_its_other_anchors_stale(harness: Harness, ws: Path) -> None:
    lines_file(ws, "k.txt", 12)
    a = anchors(harness, "k.txt")
    first = edit(harness, "k.txt", {"op": "replace", "anchor": a[7], "content": "seven"})
    assert first.output.status == "applied" and "re-hashes its whole chunk of 8" in first.text
    fresh = anchors(harness, "k.txt")
    assert first.output.snippet == "\n".join(f"{fresh[n]}|l{n}" for n in range(1, 10)).replace(
        "|l7", "|seven"
    )  # the chunk (1-8), all fresh, and the context line after the edit
    again = edit(
        harness, "k.txt", {"op": "delete", "anchor": a[2]}, {"op": "delete", "anchor": a[11]}
    )
    assert again.output.status == "stale" and "edits[1]" not in again.text


BAD: list[tuple[Callable[[dict[int, str]], Any], str]] = [
    (
        lambda a: [{"op": "replace", "anchor": a[5], "end_anchor": a[3], "content": "x"}],
        "backwards",
    ),
    (lambda a: [{"op": "replace", "anchor": "5", "content": "x"}], "not an anchor"),
    (lambda a: [{"op": "replace", "anchor": "five:abc", "content": "x"}], "not an anchor"),
    (lambda a: [{"op": "replace", "anchor": "5-abc", "content": "x"}], "not an anchor"),
    (lambda a: [{"op": "replace", "anchor": "5:a!c", "content": "x"}], "not an anchor"),
    (lambda a: [{"op": "replace", "anchor": "5:ilo", "content": "x"}], "not an anchor"),
    (lambda a: [{"op": "replace", "anchor": a[5][:-1], "content": "x"}], "2-character hash"),
    (lambda a: [{"op": "replace", "anchor": "0:abc", "content": "x"}], "start at 1"),
    (lambda a: [{"op": "delete", "anchor": "0"}], "only for insert_after"),
    (lambda a: [{"op": "replace", "anchor": "EOF", "content": "x"}], "only for insert_after"),
    (
        lambda a: [{"op": "insert_after", "anchor": a[2], "end_anchor": a[3], "content": "x"}],
        "no `end_anchor`",
    ),
    (lambda a: [{"op": "insert_after", "anchor": a[2], "content": ""}], "empty `content`"),
    (lambda a: [{"op": "replace", "anchor": a[2]}], "needs `content`"),
    (lambda a: [{"op": "delete", "anchor": a[2], "content": "x"}], "takes no `content`"),
    (lambda a: [{"op": "rename", "anchor": a[2]}], "op"),
    (lambda a: [], "edits"),
    (lambda a: [{"op": "replace", "anchor": a[2], "content": f"{a[2]}|l2\n{a[3]}|l3"}], "prefix"),
    (
        lambda a: [
            {"op": "replace", "anchor": a[2], "end_anchor": a[4], "content": "x"},
            {"op": "delete", "anchor": a[4], "end_anchor": a[6]},
        ],
        "both change line 4",
    ),
    (
        lambda a: [
            {"op": "delete", "anchor": a[2], "end_anchor": a[4]},
            {"op": "insert_after", "anchor": a[3], "content": "x"},
        ],
        "replaces or deletes",
    ),
]


@pytest.mark.parametrize(("edits", "fragment"), BAD, ids=[f for _, f in BAD])
def test_malformed_edits_are_refused_and_write_nothing(
    harness: Harness, ws: Path, edits: Callable[[dict[int, str]], Any], fragment: str
) -> None:
    lines_file(ws, "b.txt", 8)
    before = snapshot(ws)
    res = harness.call(HashlineEdit, {"path": "b.txt", "edits": edits(anchors(harness, "b.txt"))})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert fragment in res.error.detail, res.error.detail
    assert snapshot(ws) == before


def test_renamed_edits_argument_is_named_in_errors(harness: Harness, ws: Path) -> None:
    lines_file(ws, "n.txt", 3)
    res = edit(harness, "n.txt", {"op": "delete", "anchor": "2"}, param_names={"edits": "ops"})
    assert res.error is not None and "ops[0].anchor `2` is not an anchor" in res.error.detail


def test_directories_and_binary_files_are_not_edited(harness: Harness, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "bin").write_bytes(b"a\x00b\n")
    for path in ("d", "bin"):
        res = edit(harness, path, {"op": "insert_after", "anchor": "EOF", "content": "x"})
        assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS, path
    assert (ws / "bin").read_bytes() == b"a\x00b\n"


def test_plan_mode_refuses_edits_but_not_reads(harness: Harness, ws: Path) -> None:
    lines_file(ws, "p.txt", 3)
    a = anchors(harness, "p.txt")
    harness.call(EnterPlanMode, {})
    res = edit(harness, "p.txt", {"op": "delete", "anchor": a[1]})
    assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED
    assert res.error.code == ErrorCode.PLAN_MODE
    assert (ws / "p.txt").read_text() == "l1\nl2\nl3\n"
    assert harness.call(HashlineRead, {"path": "p.txt"}).output.status == "ok"
    assert harness.call(HashlineGrep, {"pattern": "l2"}).output.status == "ok"


def test_paths_outside_the_workspace_are_refused(
    harness: Harness, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (tmp_path / "out_dir").mkdir()
    (tmp_path / "out_dir" / "s.txt").write_text("secret\n")
    (ws / "link.txt").symlink_to(outside)
    (ws / "linkdir").symlink_to(tmp_path / "out_dir")
    append = {"op": "insert_after", "anchor": "EOF", "content": "pwned"}
    for path in ("../outside.txt", str(outside), "link.txt", "linkdir/s.txt"):
        for tool, args in (
            (HashlineRead, {"path": path}),
            (HashlineEdit, {"path": path, "edits": [append]}),
            (HashlineGrep, {"pattern": "secret", "path": path}),
        ):
            res = harness.call(tool, args)
            assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED, (
                tool,
                path,
            )
    assert outside.read_text() == "secret\n"
    assert (tmp_path / "out_dir" / "s.txt").read_text() == "secret\n"
    assert harness.call(HashlineGrep, {"pattern": "secret"}).output.status == "no_matches"


# -- hashline_grep --------------------------------------------------------------------------------


def test_grep_anchors_are_the_read_anchors_and_edit_them(harness: Harness, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src/a.py").write_text("def foo():\n    return 1\n\n\ndef bar():\n    return 2\n")
    (ws / "notes.txt").write_text("def in prose\n")
    res = harness.call(HashlineGrep, {"pattern": r"def \w+\(", "glob": "*.py"})
    assert res.output.status == "ok" and [f.path for f in res.output.files] == ["src/a.py"]
    a = anchors(harness, "src/a.py")
    assert res.text == f"src/a.py\n{a[1]}|def foo():\n--\n{a[5]}|def bar():"
    res = harness.call(
        HashlineGrep, {"pattern": "RETURN 2", "case_insensitive": True, "context": 1}
    )
    lines = res.output.files[0].lines
    assert [(x.line, x.match) for x in lines] == [(5, False), (6, True)]
    grep_anchor = f"{lines[1].line}:{lines[1].hash}"
    out = edit(
        harness, "src/a.py", {"op": "replace", "anchor": grep_anchor, "content": "    return 3"}
    )
    assert out.output.status == "applied" and "return 3" in (ws / "src/a.py").read_text()


def test_grep_limits_no_matches_and_bad_input(harness: Harness, ws: Path) -> None:
    lines_file(ws, "many.txt", 9)
    res = harness.call(
        HashlineGrep, {"pattern": "l", "limit": 3}, param_names={"limit": "max_hits"}
    )
    assert res.output.truncated and len(res.output.files[0].lines) == 3
    assert "raise `max_hits`" in res.text
    res = harness.call(HashlineGrep, {"pattern": "zzz"})
    assert res.output.status == "no_matches" and "No matches for `zzz`" in res.text
    for args in ({"pattern": "("}, {"pattern": "l", "path": "missing/"}):
        res = harness.call(HashlineGrep, args)
        assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS, args
