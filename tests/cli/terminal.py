"""``toolhub`` run in a real pseudo-terminal, as a person at a terminal runs it.

The process gets a pty as its controlling terminal and as stdin, stdout and stderr, with the
window size set on it (``TIOCSWINSZ``) and in ``COLUMNS``/``LINES``: what it prints is laid
out for that width, and a Ctrl-C typed into it (``^C`` written to the pty's master side) is
turned into SIGINT by the kernel's line discipline, for the terminal's foreground process
group, exactly as when a person presses it. What it printed is read back with the terminal's
line endings (``\\r\\n``) made ``\\n`` again and its colours removed.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
CTRL_C = b"\x03"
_COLOUR = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1b\][^\x07]*\x07")


def _controlling_terminal() -> None:
    """In the child, before exec: a session of its own with the pty (fd 0) as its terminal."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``with Terminal(args, env, cwd, columns=80) as term: term.expect("..."); term.interrupt()``;
    on exit a process still running is killed (its whole session)."""

    def __init__(
        self,
        args: list[str],
        env: Mapping[str, str],
        cwd: Path,
        *,
        columns: int = 80,
        lines: int = 40,
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        environ = {**env, "COLUMNS": str(columns), "LINES": str(lines), "TERM": "xterm-256color"}
        environ.pop("NO_COLOR", None)
        self.master = master
        self.raw = b""
        self.proc = subprocess.Popen(
            [TOOLHUB, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=environ,
            cwd=cwd,
            preexec_fn=_controlling_terminal,  # the one way to give it a controlling terminal
        )
        os.close(slave)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        os.close(self.master)

    @property
    def text(self) -> str:
        """Everything printed so far, without colours, with ``\\n`` line endings."""
        shown = self.raw.decode("utf-8", "replace").replace("\r\n", "\n")
        return _COLOUR.sub("", shown)

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False once the terminal has closed."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the pty's slave side has exited
            return False
        self.raw += chunk
        return bool(chunk)

    def until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, f"no {what} in {timeout} s; shown:\n{self.text}"
            if not self._read(0.2) and not done():
                raise AssertionError(f"the terminal closed before {what}; shown:\n{self.text}")

    def expect(self, text: str, timeout: float = 60) -> None:
        self.until(lambda: text in self.text, timeout, repr(text))

    def interrupt(self) -> None:
        """Ctrl-C, typed."""
        os.write(self.master, CTRL_C)

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait(self, timeout: float = 60) -> int:
        """The exit status, once the process has ended; reads all it printed."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"still running after {timeout} s:\n{self.text}"
            self._read(0.2)
        while select.select([self.master], [], [], 0.2)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.raw += chunk
        return self.proc.returncode
