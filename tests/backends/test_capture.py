"""Output capture: exact text when small, head + tail when large, never a split character; a
log on a full disk is cut, closed and said so, the output in memory goes on."""

from __future__ import annotations

from pathlib import Path

from tests.small_disk import free_bytes, small_disk
from toolhub.backends.capture import OutputCapture


def feed(capture: OutputCapture, data: bytes, step: int) -> None:
    for start in range(0, len(data), step):
        capture.write(data[start : start + step])


def test_small_output_is_exact(tmp_path: Path) -> None:
    cap = OutputCapture(100, tmp_path / "a.log")
    feed(cap, b"hello\nworld\n", 3)
    cap.close()
    snap = cap.snapshot()
    assert snap.head_and_tail(100) == ("hello\nworld\n", 0)
    assert (tmp_path / "a.log").read_bytes() == b"hello\nworld\n"


def test_large_output_keeps_first_and_last_halves() -> None:
    data = b"".join(b"%06d\n" % n for n in range(10_000))
    cap = OutputCapture(1000)
    feed(cap, data, 777)
    text, omitted = cap.snapshot().head_and_tail(1000)
    head, tail = text.split("\n...\n")
    assert data.startswith(head.encode())
    assert data.endswith(tail.encode())
    assert omitted == len(data) - len(head.encode()) - len(tail.encode())
    assert len(head.encode()) == 500 and len(tail.encode()) == 500


def test_output_just_over_the_limit_shows_everything_it_can() -> None:
    data = bytes(range(97, 123)) * 50
    cap = OutputCapture(1000)
    cap.write(data)
    text, omitted = cap.snapshot().head_and_tail(1000)
    head, tail = text.split("\n...\n")
    assert head.encode() == data[:500]
    assert tail.encode() == data[-500:]
    assert omitted == len(data) - 1000


def test_cuts_never_split_a_character() -> None:
    data = ("é" * 3000).encode()
    cap = OutputCapture(1001)
    feed(cap, data, 333)
    snap = cap.snapshot()
    text, _ = snap.head_and_tail(1001)
    assert "\ufffd" not in text
    first, _ = snap.first(101)
    last, _ = snap.last(101)
    assert "\ufffd" not in first + last
    assert set(first) == {"é"} and set(last) == {"é"}


def test_log_is_capped() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "x.log"
        cap = OutputCapture(10, log, log_limit_bytes=100)
        feed(cap, b"x" * 1000, 64)
        cap.close()
        body = log.read_bytes()
        assert body.startswith(b"x" * 100)
        assert b"x" * 101 not in body
        assert b"log truncated" in body
        assert cap.total_bytes == 1000


def test_a_full_disk_cuts_the_log_and_keeps_the_output_in_memory(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "64k") as disk:
        log = disk / "x.log"
        cap = OutputCapture(1000, log)
        data = b"".join(b"%07d\n" % n for n in range(100_000))  # 800 kB: more than the disk
        feed(cap, data, 8192)
        snap = cap.snapshot()
        cut = snap.log_cut
        assert cut is not None and cut.reason.startswith("ENOSPC")
        # The log holds exactly what it says, then nothing more is tried; it is closed.
        assert 0 < cut.written < len(data)
        assert log.read_bytes()[: cut.written] == data[: cut.written]
        assert cap._log is None
        assert snap.total_bytes == len(data)
        text, _ = snap.head_and_tail(1000)
        assert data.startswith(text.split("\n...\n")[0].encode())
        assert data.endswith(text.split("\n...\n")[1].encode())
        assert f"{cut.written:,} of {len(data):,} bytes written" in cut.describe(len(data))
        cap.close()
        # Deleting the log frees its space: no descriptor holds it.
        log.unlink()
        assert free_bytes(disk) >= 60_000
