"""Output deltas joined into whole lines before hooks see them: a partial line waits for the
next delta of its kind (or the end), a long line without a newline is not held forever."""

from __future__ import annotations

from toolhub.core import Progress
from toolhub.hooks.lines import MAX_HELD, LineJoin


def delta(text: str) -> Progress:
    return Progress.custom("output_delta", {"delta": text, "total_bytes": len(text)})


def test_a_line_cut_across_deltas_is_handed_on_whole() -> None:
    join = LineJoin()
    assert join.feed(delta("tok ghp_ab")) is None
    joined = join.feed(delta("cd\nnext"))
    assert joined is not None and joined.payload["delta"] == "tok ghp_abcd\n"
    rest = join.flush()
    assert rest is not None and rest.payload["delta"] == "next"
    assert join.flush() is None


def test_other_items_pass_and_long_lines_are_not_held() -> None:
    join = LineJoin()
    text = Progress.of_text("hello")
    assert join.feed(text) is text
    long = join.feed(delta("x" * MAX_HELD))
    assert long is not None and long.payload["delta"] == "x" * MAX_HELD
