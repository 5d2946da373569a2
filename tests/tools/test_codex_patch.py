"""The `*** Begin Patch` parser and hunk application, on plain strings."""

from __future__ import annotations

import pytest

from toolhub.tools.codex_patch import HunkError, PatchError, apply_hunks, parse


def test_parse_all_operations_and_tolerate_heredoc() -> None:
    text = """apply_patch <<'EOF'
*** Begin Patch
*** Add File: a.txt
+one
*** Delete File: b.txt
*** Update File: c.txt
*** Move to: d.txt
@@ class C:
 keep
-old
+new
*** End of File
*** End Patch
EOF"""
    add, delete, update = parse(text)
    assert (add.action, add.path, add.content) == ("add", "a.txt", "one\n")
    assert (delete.action, delete.path) == ("delete", "b.txt")
    assert (update.path, update.move_to) == ("c.txt", "d.txt")
    (hunk,) = update.hunks
    assert hunk.header == "class C:" and hunk.at_eof
    assert hunk.lines == [(" ", "keep"), ("-", "old"), ("+", "new")]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "*** Begin Patch\n*** End Patch",
        "*** Begin Patch\n*** Add File: x\n+a",
        "*** Begin Patch\n*** Frobnicate: x\n*** End Patch",
        "*** Begin Patch\n*** Update File: x\n@@\n?bad\n*** End Patch",
        "*** Begin Patch\n*** Update File: x\n*** End Patch",
    ],
)
def test_malformed_patches(text: str) -> None:
    with pytest.raises(PatchError):
        parse(text)


def test_header_narrows_the_search_and_hunks_apply_in_order() -> None:
    source = "def a():\n    return 1\n\ndef b():\n    return 1\n"
    (op,) = parse(
        "*** Begin Patch\n*** Update File: f.py\n@@ def b():\n-    return 1\n+    return 2\n"
        "*** End Patch"
    )
    assert apply_hunks(source, op.hunks, "f.py") == (
        "def a():\n    return 1\n\ndef b():\n    return 2\n"
    )


def test_two_hunks_and_pure_addition_at_end() -> None:
    source = "a\nb\nc\nd\n"
    (op,) = parse(
        "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n@@\n c\n-d\n+D\n@@\n+e\n*** End Patch"
    )
    assert apply_hunks(source, op.hunks, "f") == "A\nb\nc\nD\ne\n"


def test_hunk_that_does_not_fit() -> None:
    (op,) = parse("*** Begin Patch\n*** Update File: f\n@@\n-missing\n+x\n*** End Patch")
    with pytest.raises(HunkError, match="not found"):
        apply_hunks("a\nb\n", op.hunks, "f")
