"""The typed errors of a foreground command that ended badly, each carrying the output so far:
the kernel's OOM killer ended it (``memory_limit``), its log could not be written to the end
(``output_log_incomplete``: never an ``exit: 0`` whose log silently lacks the rest), or toolhub
stopped reading it (``worker_failed``).

Each says whether the command may have partly run, so a model does not repeat a command whose
effects already happened without checking them first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolhub.core import ToolError
from toolhub.errors import ErrorCode

if TYPE_CHECKING:
    from toolhub.backends.running import CommandResult

    from .shell import BashOutput

_MB = 1 << 20


def memory_limit_error(result: CommandResult, output: BashOutput) -> ToolError:
    """The typed error of a command the kernel's OOM killer ended, with its output so far."""
    limit = result.memory_limit_bytes
    own = f"its memory limit of {limit // _MB} MiB" if limit else "its memory limit"
    return ToolError.custom(
        ErrorCode.MEMORY_LIMIT,
        f"The command was killed by the kernel after {result.duration_s:.1f} s: it reached "
        f"{own} (or its session's commands together reached theirs). Use less memory, or "
        f"work on smaller pieces.\n{output.model_text()}",
        memory_limit_bytes=limit,
        peak_memory_bytes=result.peak_memory_bytes,
        exit_code=result.exit_code,
        log_path=output.log_path,
    )


def log_incomplete_error(result: CommandResult, output: BashOutput) -> ToolError:
    """The typed error of a command that ran but whose log could not be written to the end."""
    cut = result.output.log_cut
    assert cut is not None
    total = result.output.total_bytes
    status = f"killed ({result.killed})" if result.killed else f"exited {result.exit_code}"
    lost = (
        f"the {total - cut.written:,} bytes after them are lost, except what is shown below"
        if output.omitted_bytes
        else "all of its output is shown below"
    )
    return ToolError.custom(
        ErrorCode.OUTPUT_LOG_INCOMPLETE,
        f"The command ran and {status} after {result.duration_s:.1f} s, but this host could "
        f"not write its output log ({cut.reason}): {cut.written:,} of its {total:,} bytes are "
        f"in {output.log_path}; {lost}.\n{output.model_text()}",
        exit_code=result.exit_code,
        total_bytes=total,
        log_bytes_written=cut.written,
        reason=cut.reason,
        log_path=output.log_path,
        may_have_run=True,
    )


def reader_error(result: CommandResult, output: BashOutput) -> ToolError:
    """The typed error of a command toolhub stopped reading (a fault of its own): killed."""
    return ToolError.custom(
        ErrorCode.WORKER_FAILED,
        f"toolhub stopped reading the command's output after {result.duration_s:.1f} s "
        f"({result.reader_error}) and killed it; what it printed until then is below, and it "
        f"may have partly run.\n{output.model_text()}",
        exit_code=result.exit_code,
        total_bytes=result.output.total_bytes,
        log_path=output.log_path,
        may_have_run=True,
    )
