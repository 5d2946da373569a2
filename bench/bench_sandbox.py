"""Start-time cost of the command sandbox: ``bash -c true`` through ``ProcessRunner``, without
and with bubblewrap (the session's shared sandbox, the default; and a sandbox per command, as
with ``TOOLHUB_SANDBOX_SHARED=0``) and with the Landlock fallback (``workspace_write``,
network off), p50 and p90 over N runs each, interleaved so drift hits all alike. Target: at
most 10 ms extra at p50 (for bwrap, the default where it runs).

    .venv/bin/python bench/bench_sandbox.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from toolhub.backends.process import ProcessRunner
from toolhub.sandbox import Mechanism, SandboxMode, SandboxPolicy, probe
from toolhub.sandbox.landlock_syscalls import abi_version


def _once(runner: ProcessRunner) -> float:
    started = time.perf_counter()
    result = runner.run("true", log_name="bench")
    took = time.perf_counter() - started
    assert result.exit_code == 0, result
    return took * 1000


def _pair(plain: ProcessRunner, boxed: ProcessRunner, runs: int) -> tuple[list[float], ...]:
    """``runs`` of each, interleaved, after a warm-up (page cache, the probe)."""
    for _ in range(10):
        _once(plain), _once(boxed)
    a: list[float] = []
    b: list[float] = []
    for _ in range(runs):
        a.append(_once(plain))
        b.append(_once(boxed))
    return a, b


def _pct(xs: list[float], q: int) -> float:
    return statistics.quantiles(xs, n=100)[q - 1]


def _report(
    name: str, a: list[float], b: list[float], note: str, target_ms: float | None = None
) -> None:
    p50a, p50b = statistics.median(a), statistics.median(b)
    print(f"  unsandboxed  p50 {p50a:7.2f} ms   p90 {_pct(a, 90):7.2f} ms")
    print(f"  {name:<11}  p50 {p50b:7.2f} ms   p90 {_pct(b, 90):7.2f} ms")
    print(f"  ratio p50 {p50b / p50a:.2f}x   extra p50 {p50b - p50a:+.2f} ms ({note})")
    if target_ms is not None:
        verdict = "PASS" if p50b - p50a <= target_ms else "MISS"
        print(
            f"target {name} <= {target_ms:.0f} ms extra at p50: {verdict} ({p50b - p50a:+.2f} ms)"
        )


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
        each = ProcessRunner(ws, Path(base) / "logs", sandbox=policy, shared_sandbox=False)
        print(f"runs: {runs} each, bwrap: {support.binary}")
        print("bwrap, the session's shared sandbox (the default where bwrap runs):")
        _report("bwrap", *_pair(plain, boxed, runs), "the default", target_ms=10.0)
        print("bwrap, a sandbox per command (TOOLHUB_SANDBOX_SHARED=0):")
        _report("bwrap each", *_pair(plain, each, runs), "one sandbox per command")
        if abi_version() >= 1:
            landlocked = ProcessRunner(
                ws, Path(base) / "logs", sandbox=policy.enforced_by(Mechanism.LANDLOCK)
            )
            print(f"Landlock (the fallback where bwrap cannot run; ABI {abi_version()}):")
            _report("landlock", *_pair(plain, landlocked, runs), "a Python exec wrapper")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
