"""Start-time cost of the command sandbox: ``bash -c true`` through ``ProcessRunner``, without
and with bubblewrap (``workspace_write``, network off), p50 and p90 over N runs each,
interleaved so drift hits both alike. Target: at most 10 ms extra at p50.

    .venv/bin/python bench/bench_sandbox.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from toolhub.backends.process import ProcessRunner
from toolhub.sandbox import SandboxMode, SandboxPolicy, probe


def _once(runner: ProcessRunner) -> float:
    started = time.perf_counter()
    result = runner.run("true", log_name="bench")
    took = time.perf_counter() - started
    assert result.exit_code == 0, result
    return took * 1000


def main(runs: int = 200) -> None:
    support = probe()
    if not support.available:
        sys.exit(f"bwrap cannot sandbox here: {support.reason}")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as base:
        ws = Path(base) / "ws"
        ws.mkdir()
        policy = SandboxPolicy(ws, SandboxMode.WORKSPACE_WRITE, tmp_dir=Path(base) / "tmp")
        plain = ProcessRunner(ws, Path(base) / "logs")
        boxed = ProcessRunner(ws, Path(base) / "logs", sandbox=policy)
        for _ in range(10):  # warm up: page cache, the probe, env --default-signal
            _once(plain), _once(boxed)
        a: list[float] = []
        b: list[float] = []
        for _ in range(runs):
            a.append(_once(plain))
            b.append(_once(boxed))

    def pct(xs: list[float], q: int) -> float:
        return statistics.quantiles(xs, n=100)[q - 1]

    p50a, p50b = statistics.median(a), statistics.median(b)
    print(f"runs: {runs} each, bwrap: {support.binary}")
    print(f"unsandboxed  p50 {p50a:7.2f} ms   p90 {pct(a, 90):7.2f} ms")
    print(f"sandboxed    p50 {p50b:7.2f} ms   p90 {pct(b, 90):7.2f} ms")
    print(f"ratio p50 {p50b / p50a:.2f}x   extra p50 {p50b - p50a:+.2f} ms (target <= 10 ms)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
