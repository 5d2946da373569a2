"""``make bench``: run every benchmark script in this folder and print their tables.

Each script measures toolhub against baselines in the same run, so the ratios hold on whatever
machine runs them. Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n## {script.stem}\n", flush=True)
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        if code != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
