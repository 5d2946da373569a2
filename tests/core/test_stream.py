from hypothesis import given
from hypothesis import strategies as st

from toolhub.core import ContentBlock, OutputDeltas, Progress


def test_progress_round_trips_through_dicts():
    items = [
        Progress.of_text("hi"),
        Progress.of_content(ContentBlock("image", data="aGk=", mime_type="image/png")),
        Progress.custom("bash_output", {"delta": "x", "total_bytes": 1}),
    ]
    for item in items:
        assert Progress.from_dict(item.to_dict()) == item


def test_deltas_are_capped_at_16_kib():
    deltas = OutputDeltas()
    items = deltas.feed(b"a" * 40_000)
    sizes = [len(i.payload["delta"].encode()) for i in items]
    assert max(sizes) <= 16 * 1024 and sum(sizes) == 40_000
    assert items[-1].payload["total_bytes"] == 40_000


def test_a_split_character_is_held_back_until_complete():
    deltas = OutputDeltas()
    snow = "☃".encode()
    assert deltas.feed(b"ab" + snow[:1])[0].payload["delta"] == "ab"
    assert deltas.feed(snow[1:2]) == []
    (item,) = deltas.feed(snow[2:])
    assert item.payload["delta"] == "☃"


@given(
    st.text(max_size=300), st.lists(st.integers(1, 50), min_size=1, max_size=30), st.integers(4, 64)
)
def test_deltas_reassemble_exactly_and_never_split_characters(text, cuts, cap):
    data = text.encode()
    deltas = OutputDeltas(max_delta_bytes=cap)
    out: list[str] = []
    pos = 0
    for cut in cuts * (len(data) // max(sum(cuts), 1) + 1):
        if pos >= len(data):
            break
        for item in deltas.feed(data[pos : pos + cut]):
            delta = item.payload["delta"]
            assert "\ufffd" not in delta or "\ufffd" in text
            assert len(delta.encode()) <= cap
            out.append(delta)
        pos += cut
    out.extend(i.payload["delta"] for i in deltas.flush())
    assert "".join(out) == text
