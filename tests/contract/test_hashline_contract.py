"""The Hashline file tools under every executor (see conftest.py): anchors read on one call
edit on the next (the scheme params reach the worker), a stale anchor writes nothing, renamed
arguments are named back, and paths outside the workspace are refused."""

from __future__ import annotations

import re
from pathlib import Path

SCHEME = {"scheme": "chunk", "hash_len": 2, "chunk_size": 4}
HASHLINE = {
    "tools": [
        {"id": "Hashline:hashline_read", "name": "view", "params": SCHEME},
        {
            "id": "Hashline:hashline_edit",
            "name": "patch",
            "params": SCHEME,
            "rename": {"edits": "changes"},
        },
        {"id": "Hashline:hashline_grep", "params": SCHEME},
    ]
}


def _anchor(text: str, line: int) -> str:
    found = re.search(rf"^({line}:[0-9a-z]{{2}})\|", text, re.M)
    assert found is not None, text
    return found.group(1)


def test_read_grep_edit_and_a_stale_anchor(session_factory, tmp_path: Path):
    source = tmp_path / "ws" / "m.py"
    source.write_text("".join(f"v{n} = {n}\n" for n in range(1, 11)))
    session = session_factory(HASHLINE)
    names = [d["function"]["name"] for d in session.definitions()]
    assert names == ["view", "patch", "hashline_grep"]
    read = session.call_sync("view", {"path": "m.py"})
    assert not read.is_error, read.prompt_text
    found = session.call_sync("hashline_grep", {"pattern": "v7 ="})
    assert _anchor(found.prompt_text, 7) == _anchor(read.prompt_text, 7)
    change = {"op": "replace", "anchor": _anchor(read.prompt_text, 7), "content": "v7 = 70"}
    done = session.call_sync("patch", {"path": "m.py", "changes": [change]})
    assert not done.is_error and done.output.value["status"] == "applied", done.prompt_text
    after = source.read_text()
    assert "v7 = 70\n" in after
    stale = {"op": "delete", "anchor": _anchor(read.prompt_text, 6)}  # same chunk: re-hashed
    refused = session.call_sync("patch", {"path": "m.py", "changes": [stale]})
    assert refused.output.value["status"] == "stale" and "changes[0].anchor" in refused.prompt_text
    assert source.read_text() == after


def test_hashline_paths_outside_the_workspace_are_refused(session_factory, tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    session = session_factory(HASHLINE)
    append = {"op": "insert_after", "anchor": "EOF", "content": "x"}
    for name, args in (
        ("view", {"path": "../outside.txt"}),
        ("patch", {"path": str(outside), "changes": [append]}),
        ("hashline_grep", {"pattern": "keep", "path": ".."}),
    ):
        result = session.call_sync(name, args)
        assert result.error is not None and result.error.kind == "permission_denied", name
    assert outside.read_text() == "keep me\n"
