"""ripgrep as a resource: the search tools run the real ``rg`` and read its output as a stream.

``rg`` comes from the ``ripgrep`` wheel (installed next to the interpreter) or the PATH. Output
is read line by line and the process is stopped as soon as enough lines are in, so a pattern
that matches a million lines costs no more than one that matches the first hundred. stderr goes
to a temporary file, never a pipe: thousands of "permission denied" lines must not deadlock a
reader that is busy with stdout.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from toolhub.core import CancelToken, ToolError
from toolhub.errors import ErrorCode

STDERR_LIMIT = 4000


@dataclass(frozen=True, slots=True)
class RgResult:
    lines: list[str]
    exit_code: int | None
    stderr: str
    stopped_early: bool
    """True when rg was stopped because ``max_lines`` were read (more output existed)."""
    timed_out: bool = False
    cancelled: bool = False


def find_rg() -> str | None:
    """The ``rg`` of this environment's scripts directory, else the one on the PATH."""
    return shutil.which("rg", path=sysconfig.get_path("scripts")) or shutil.which("rg")


class Ripgrep:
    """Runs ``rg`` with a line budget, a timeout and cancellation."""

    def __init__(self, binary: str | None = None) -> None:
        self._binary = binary

    @property
    def binary(self) -> str:
        if self._binary is None:
            found = find_rg()
            if found is None:
                raise ToolError.custom(
                    ErrorCode.MISSING_BINARY, "ripgrep (`rg`) is not installed on this worker"
                )
            self._binary = found
        return self._binary

    def run(
        self,
        args: list[str],
        *,
        cwd: Path,
        max_lines: int | None = None,
        timeout_s: float = 20.0,
        cancel: CancelToken | None = None,
    ) -> RgResult:
        """Run ``rg args`` in ``cwd``; at most ``max_lines`` lines of stdout are kept."""
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [self.binary, *args],
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
            timed_out = threading.Event()

            def expire() -> None:
                timed_out.set()
                _kill(proc)

            timer = threading.Timer(timeout_s, expire)
            timer.daemon = True
            timer.start()
            unregister = cancel.on_cancel(lambda: _kill(proc)) if cancel is not None else None
            lines: list[str] = []
            stopped = False
            try:
                assert proc.stdout is not None
                for raw in proc.stdout:
                    if max_lines is not None and len(lines) >= max_lines:
                        stopped = True
                        _kill(proc)
                        break
                    lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
                proc.stdout.close()
                code = proc.wait()
            finally:
                timer.cancel()
                if unregister is not None:
                    unregister()
                if proc.poll() is None:
                    _kill(proc)
                    proc.wait()
            err.seek(0)
            stderr = err.read(STDERR_LIMIT).decode("utf-8", "replace")
        return RgResult(
            lines=lines,
            exit_code=None if stopped or timed_out.is_set() else code,
            stderr=stderr,
            stopped_early=stopped,
            timed_out=timed_out.is_set(),
            cancelled=cancel is not None and cancel.cancelled,
        )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
