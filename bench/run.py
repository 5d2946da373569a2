"""``make bench``: run every benchmark script in this folder and print their tables.

Each script measures toolhub against baselines in the same run, so the ratios hold on whatever
machine runs them. Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
#: The benches start their own workers and gateways: whoever runs them as root is the operator
#: allowing it (docs/sandbox.md, "Root").
BENCH_ENV = {**os.environ, **({"TOOLHUB_ALLOW_ROOT": "1"} if os.geteuid() == 0 else {})}


def main() -> int:
    failed = []
    verdicts: list[tuple[str, str]] = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n## {script.stem}\n", flush=True)
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=HERE.parent,
            stdout=subprocess.PIPE,
            text=True,
            env=BENCH_ENV,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if "PASS" in line or "MISS" in line:
                verdicts.append((script.stem, line.strip()))
        if proc.wait() != 0:
            failed.append(script.name)
    print("\n## every target, with its verdict\n")
    for stem, line in verdicts:
        print(f"- {stem}: {line}")
    passed = sum("PASS" in line and "MISS" not in line for _, line in verdicts)
    print(f"\n{passed} of {len(verdicts)} targets met")
    missed = sorted({stem for stem, line in verdicts if "MISS" in line})
    if failed or missed:
        names = ", ".join(sorted({*failed, *(f"{stem}.py" for stem in missed)}))
        print(f"\nnot every target met, or a bench failed: {names}", file=sys.stderr)
    return 1 if failed or missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
