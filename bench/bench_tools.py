"""Benchmarks of the built-in tools; prints a markdown table.

    python bench/bench_tools.py [--files 50000] [--repeat 7]

* grep over a generated tree of many small files, through the tool, against running ``rg``
  directly with the same arguments and with plain ``rg -n`` (target: within 1.3x);
* read_file of a 10 MB file: time and peak Python memory (tracemalloc);
* read_file of a small file through a whole embedded session call, against the tool alone;
* foreground bash: delay between the command writing its first output and the first progress
  item reaching the caller (target: < 50 ms), and time from the call to that first item.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolhub import Session  # noqa: E402
from toolhub.assembly import install_local_resources  # noqa: E402
from toolhub.backends.ripgrep import find_rg  # noqa: E402
from toolhub.core import Container, ErasedTool, Outcome, Progress, ToolContext  # noqa: E402
from toolhub.tools.read_file import ReadFile  # noqa: E402
from toolhub.tools.search import Grep  # noqa: E402
from toolhub.tools.shell import Bash  # noqa: E402

Row = tuple[str, str, str, str]


def make_tree(root: Path, count: int) -> None:
    """``count`` small source files in nested directories; one in 500 holds a needle, one in
    25 a marker."""
    body = "".join(f"def function_{n}(value):\n    return value * {n}\n" for n in range(20))
    for n in range(count):
        folder = root / f"pkg{n % 50:02d}" / f"mod{(n // 50) % 40:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        extra = f"NEEDLE_{n} = True\n" if n % 500 == 0 else ""
        extra += "MARKER = 1\n" if n % 25 == 0 else ""
        (folder / f"file_{n}.py").write_text(body + extra)
    (root / ".gitignore").write_text("*.tmp\n")


def context(container: Container, call_id: str = "bench") -> ToolContext:
    return ToolContext(call_id=call_id, container=container, session_id="bench")


def run_tool(tool: Any, container: Container, args: dict[str, Any]) -> Outcome:
    erased = ErasedTool(tool)
    parsed = erased.parse_args(args, client_name=tool.id)
    return erased.run_sync(context(container), parsed)


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def interleaved(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Median time of each function, run in turns so that load from other processes hits all
    of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, bucket in zip(fns, times, strict=True):
            started = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - started)
    return [statistics.median(bucket) for bucket in times]


def bench_grep(container: Container, root: Path, repeat: int) -> list[Row]:
    rg = find_rg()
    assert rg is not None, "ripgrep is not installed"
    rows: list[Row] = []
    cases = [
        ("content", "NEEDLE_\\d+", {"output_mode": "content"}),
        ("files_with_matches", "^MARKER", {"output_mode": "files_with_matches"}),
    ]
    for mode, pattern, extra in cases:
        args = {"pattern": pattern, **extra, "head_limit": 10_000}
        out = run_tool(Grep(), container, args)
        assert out.error is None, out.error
        shown = len(out.output.value["lines"]) if out.output is not None else 0
        flags = (
            ["--line-number", "--no-heading", "--with-filename"]
            if mode == "content"
            else ["--files-with-matches", "--with-filename"]
        )
        same = [
            rg,
            "--no-config",
            "--color=never",
            "--hidden",
            "--glob=!.git",
            "--no-require-git",
            "--max-columns=1000",
            "--max-columns-preview",
            *flags,
            "--",
            pattern,
        ]
        plain = [rg, "-n" if mode == "content" else "-l", pattern]
        tool_s, same_s, plain_s = interleaved(
            [
                lambda a=args: run_tool(Grep(), container, a),
                lambda c=same: subprocess.run(c, cwd=root, capture_output=True),
                lambda c=plain: subprocess.run(c, cwd=root, capture_output=True),
            ],
            repeat,
        )
        rows.append(
            (
                f"grep ({mode}, {shown} results)",
                f"{tool_s * 1000:.0f} ms",
                f"rg same args {same_s * 1000:.0f} ms; plain rg {plain_s * 1000:.0f} ms",
                f"{tool_s / same_s:.2f}x of rg (target <= 1.3x)",
            )
        )
    return rows


def bench_read(container: Container, root: Path, repeat: int) -> list[Row]:
    big = root / "big.log"
    with open(big, "w") as fh:
        line = "x" * 90
        for n in range(110_000):
            fh.write(f"{n:08d} {line}\n")
    size = big.stat().st_size
    rows: list[Row] = []
    for label, args in [
        ("first window", {"path": "big.log"}),
        ("last 100 lines (offset -100)", {"path": "big.log", "offset": -100}),
    ]:
        tracemalloc.start()
        out = run_tool(ReadFile(), container, args)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert out.error is None, out.error
        took = median_time(lambda a=args: run_tool(ReadFile(), container, a), repeat)
        rows.append(
            (
                f"read_file {size / 1e6:.1f} MB, {label}",
                f"{took * 1000:.1f} ms",
                f"peak traced memory {peak / 1e6:.2f} MB",
                f"{peak / size:.1%} of the file size",
            )
        )
    return rows


def bench_small_read(tmp: Path, repeat: int) -> list[Row]:
    """A 20-line file three folders deep, as a coding agent reads most files: a whole
    embedded ``Session.call_sync`` (validation, the tool, then the reminders every read ends
    with, skill discovery among them) against the tool run alone (arguments parsed once)."""
    root = tmp / "small"
    folder = root / "pkg" / "api" / "src"
    folder.mkdir(parents=True)
    (folder / "a.py").write_text("".join(f"value_{n} = {n}\n" for n in range(20)))
    args = {"path": "pkg/api/src/a.py"}
    container = Container()
    install_local_resources(
        container, workspace=root, session_dir=tmp / "small-session", session_id="bench"
    )
    with Session.embedded(None, root, state_dir=tmp / "small-state") as session:

        def whole() -> None:
            for _ in range(100):
                session.call_sync("read_file", args)

        erased = ErasedTool(ReadFile())
        parsed = erased.parse_args(args, client_name="read_file")

        def alone() -> None:
            for _ in range(100):
                erased.run_sync(context(container), parsed)

        call_s, tool_s = interleaved([whole, alone], repeat)
    return [
        (
            "read_file of a small file 3 folders deep, embedded `call_sync`",
            f"{call_s * 1e4:.0f} us",
            f"the tool alone {tool_s * 1e4:.0f} us",
            "the session's validation and reminders on top",
        )
    ]


async def first_progress(container: Container, command: str, n: int) -> tuple[float, float]:
    """(output-to-progress delay, call-to-first-progress time) of one foreground command whose
    first output is the time it was written."""
    erased = ErasedTool(Bash())
    args = erased.parse_args({"command": command, "description": "probe"}, client_name="bash")
    called = time.time()
    delay = first = -1.0
    async for item in erased.stream(context(container, f"lat{n}"), args):
        if isinstance(item, Progress) and first < 0:
            first = time.time()
            delay = first - float(item.payload["delta"].split()[0])
    return delay, first - called


def bench_bash(container: Container, repeat: int) -> list[Row]:
    runs = max(repeat, 20)
    probe = "python3 -c 'import time; print(time.time(), flush=True); time.sleep(0.05)'"
    delays = sorted(asyncio.run(first_progress(container, probe, n))[0] for n in range(runs))
    p95 = delays[int(len(delays) * 0.95) - 1]
    starts = [asyncio.run(first_progress(container, "date +%s.%N", n))[1] for n in range(runs)]
    direct = median_time(
        lambda: subprocess.run(["bash", "-c", "date +%s.%N"], capture_output=True, check=True),
        runs,
    )
    return [
        (
            "bash: first output -> first progress item",
            f"{statistics.median(delays) * 1000:.2f} ms median",
            f"p95 {p95 * 1000:.2f} ms over {len(delays)} runs",
            "target < 50 ms",
        ),
        (
            "bash: call -> first progress (`date`)",
            f"{statistics.median(starts) * 1000:.1f} ms median",
            f"`bash -c date` run to completion by subprocess: {direct * 1000:.1f} ms",
            "spawn, limits prelude, pids cgroup",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=11)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolhub-bench-") as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        started = time.perf_counter()
        make_tree(root, opts.files)
        print(f"generated {opts.files} files in {time.perf_counter() - started:.1f} s\n")
        container = Container()
        install_local_resources(
            container, workspace=root, session_dir=Path(tmp) / "session", session_id="bench"
        )
        rows = [
            *bench_grep(container, root, opts.repeat),
            *bench_read(container, root, opts.repeat),
            *bench_small_read(Path(tmp), opts.repeat),
            *bench_bash(container, opts.repeat),
        ]
    print("| benchmark | toolhub | baseline | note |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
