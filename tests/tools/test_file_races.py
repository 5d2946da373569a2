"""The symlink-swap race against the file tools (issue 13, item 4).

A process keeps exchanging the workspace directory ``d/`` with a symlink to a directory outside
the workspace while the tools read, write, edit and delete files under ``d/``. Each call is
checked after it returns: nothing outside may have been read, written, edited or deleted, and
no temp file may be left outside. The race runs once with ``openat2`` and once with the
``O_NOFOLLOW`` walk that replaces it on kernels without the system call. Before this was fixed,
200-300 tries put 17-75 reads, 8-26 writes, 1-10 edits, 2-25 deletes and 12-22 temp files outside,
and a FIFO exchanged with a file hung ``read_file``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tools.harness import Harness, Result
from toolhub.backends import beneath
from toolhub.tools.codex import CodexReadFile
from toolhub.tools.edit_file import EditFile
from toolhub.tools.file_ops import DeleteFile, WriteFile
from toolhub.tools.read_file import ReadFile

TRIES = 200
#: The race runs for this long, or until ``MIN_TRIES`` tries have caught it at least once
#: (however slow a busy machine makes each try).
BUDGET_S = 5.0
MIN_TRIES = 50
#: A read that has not come back within this long hung (a read takes milliseconds).
HUNG_S = 30.0
SECRET = "outside secret\n"
NAMES = ("secret.txt", "edit.txt", "victim.txt")
PRISTINE = dict.fromkeys(NAMES, SECRET)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
_renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
SWAP = """
import ctypes, os, sys
exchange = ctypes.CDLL(None, use_errno=True).renameat2
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
while exchange(-100, a, -100, b, 2) == 0:  # RENAME_EXCHANGE
    pass
"""


class Swapper:
    """A process that exchanges two paths as fast as it can, atomically
    (``renameat2(RENAME_EXCHANGE)``), so ``a`` is always either what it was or what ``b`` was.

    A process, like the command in the workspace an attacker would run, so that it races the
    tools without waiting for the GIL. ``paused()`` stops it (``SIGSTOP``), puts everything back
    in place while the test resets the files for the next try, and lets it go on.
    """

    def __init__(self, a: Path, b: Path, swapped: Callable[[], bool]) -> None:
        self.a, self.b, self.swapped = a, b, swapped
        self.process: subprocess.Popen[bytes] | None = None

    def exchange(self) -> None:
        a, b = os.fsencode(self.a), os.fsencode(self.b)
        if _renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            raise OSError(ctypes.get_errno(), "renameat2")

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        self.process = subprocess.Popen([sys.executable, "-c", SWAP, str(self.a), str(self.b)])
        try:
            yield
        finally:
            self.process.kill()
            self.process.wait()
            if self.swapped():
                self.exchange()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)
        os.waitpid(self.process.pid, os.WUNTRACED)
        if self.swapped():
            self.exchange()
        try:
            yield
        finally:
            os.kill(self.process.pid, signal.SIGCONT)


def late(res: Result) -> bool:
    """The swap came after the tool's check and was caught on the way in."""
    return bool(res.error and "appeared on its way" in res.error.detail)


def outside_files(outside: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in outside.iterdir()}


def reset_outside(outside: Path) -> None:
    for p in outside.iterdir():
        p.unlink()
    for name, text in PRISTINE.items():
        (outside / name).write_text(text)


def attack(
    harness: Harness, ws: Path, outside: Path, outcomes: list[Result]
) -> tuple[Counter[str], int]:
    """Run the four operations ``TRIES`` times under the swapper; count what landed outside."""
    (ws / "d").mkdir()
    reset_outside(outside)
    landed: Counter[str] = Counter()
    os.symlink("../outside", ws / "d.link")
    swapper = Swapper(ws / "d", ws / "d.link", (ws / "d").is_symlink)
    deadline = time.monotonic() + BUDGET_S
    tries = 0
    with swapper.running():
        while tries < TRIES and (
            time.monotonic() < deadline or tries < MIN_TRIES or not any(map(late, outcomes))
        ):
            tries += 1
            with swapper.paused():
                for name in NAMES:
                    (ws / "d" / name).write_text("inside\n")
                if outside_files(outside) != PRISTINE:
                    reset_outside(outside)
            res = harness.call(ReadFile, {"path": "d/secret.txt"})
            if res.error is None and "outside secret" in res.output.content:
                landed["read"] += 1
            outcomes.append(res)
            outcomes.append(harness.call(WriteFile, {"path": "d/written.txt", "content": "w\n"}))
            edit = {"path": "d/edit.txt", "old_string": "o", "new_string": "X"}
            outcomes.append(harness.call(EditFile, edit))
            outcomes.append(harness.call(DeleteFile, {"path": "d/victim.txt"}))
            now = outside_files(outside)
            landed["write"] += "written.txt" in now
            landed["edit"] += now.get("edit.txt") != SECRET
            landed["delete"] += "victim.txt" not in now
            landed["tmp"] += sum(name.endswith(".tmp") for name in now)
    return landed, tries


@pytest.mark.parametrize("resolver", ["openat2", "walk"])
def test_symlink_swaps_never_reach_outside(
    harness: Harness,
    ws: Path,
    tmp_path: Path,
    resolver: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if resolver == "openat2" and beneath.openat2 is None:
        pytest.skip("this kernel has no openat2")
    if resolver == "walk":
        monkeypatch.setattr(beneath, "openat2", None)
    outside = tmp_path / "outside"
    outside.mkdir()
    outcomes: list[Result] = []
    landed, tries = attack(harness, ws, outside, outcomes)
    kinds = Counter(res.error.kind.value if res.error else "ok" for res in outcomes)
    caught = sum(map(late, outcomes))
    summary = (
        f"{tries} tries, landed outside {dict(+landed)}, outcomes {dict(kinds)}, late {caught}"
    )
    assert tries >= MIN_TRIES, summary
    assert kinds["ok"] > 0 and caught > 0, summary  # the race ran, and was caught after the check
    assert set(kinds) <= {"ok", "permission_denied"}, summary  # typed refusals, no crash
    assert +landed == Counter(), summary
    assert outside_files(outside) == PRISTINE


def test_a_fifo_swapped_in_never_hangs_a_read(harness: Harness, ws: Path) -> None:
    """``f.txt`` is exchanged with a FIFO that nobody writes to: opening it for reading would
    block forever, so every read must still come back (with the text, or a refusal)."""
    (ws / "f.txt").write_text("plain text\n")
    os.mkfifo(ws / "f.fifo")
    swapper = Swapper(ws / "f.txt", ws / "f.fifo", lambda: (ws / "f.txt").is_fifo())
    outcomes: list[Result] = []

    def calls() -> None:
        for _ in range(TRIES):
            outcomes.append(harness.call(ReadFile, {"path": "f.txt"}))
            outcomes.append(harness.call(CodexReadFile, {"file_path": "f.txt"}))

    with swapper.running():
        worker = threading.Thread(target=calls, daemon=True)
        worker.start()
        # Hung: no read came back for ``HUNG_S``, however slowly a busy machine runs the rest.
        seen, progressed = -1, time.monotonic()
        while worker.is_alive() and time.monotonic() - progressed < HUNG_S:
            if len(outcomes) != seen:
                seen, progressed = len(outcomes), time.monotonic()
            worker.join(0.1)
    assert not worker.is_alive(), f"a read hung after {len(outcomes)} calls"
    texts = Counter(
        "fifo" if "FIFO" in res.text else "text" if "plain text" in res.text else res.text
        for res in outcomes
    )
    assert texts["fifo"] > 0 and texts["text"] > 0, texts  # both were met
    assert set(texts) == {"fifo", "text"}, texts
