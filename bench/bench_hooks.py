"""What the hooks cost an embedded call: the default policy (the secrets hook on every output)
against hooks off (``hooks: {always: []}``), and ``redact_secrets`` on texts of a few sizes.

    .venv/bin/python bench/bench_hooks.py

The call is ``bench_core.py``'s no-op through ``Session.call_sync``, one session per policy,
their blocks of 2,000 calls taken in turn (``bench_core.p50s_us``), so a slow phase of the
machine weighs on both alike. Prints each side's p50 per call and the difference.
"""

from __future__ import annotations

import os
import sys
import tempfile
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_core import Noop, p50s_us
from toolhub import Session, ToolSetBuilder
from toolhub.redaction import redact_secrets
from toolhub.tools import CATALOG

POLICIES = {"hooks off": "hooks: {always: []}\n", "secrets (default)": "{}\n"}


def main() -> None:
    builder = ToolSetBuilder(CATALOG, plugins=False).register(Noop)
    args = {"text": "hi"}
    with tempfile.TemporaryDirectory() as tmp:
        sessions = {}
        for name, policy in POLICIES.items():
            path = Path(tmp) / f"{len(sessions)}.yaml"
            path.write_text(policy)
            os.environ["TOOLHUB_POLICY"] = str(path)  # read when the session is made
            work = Path(tmp) / f"ws{len(sessions)}"
            work.mkdir()
            sessions[name] = Session.embedded(
                {"tools": [{"id": "Main:noop"}]}, work, state_dir=work / ".s", builder=builder
            )
        calls = {
            name: ((lambda s=s: s.call_sync("noop", args)), 2000) for name, s in sessions.items()
        }
        p50 = p50s_us(calls)
        for session in sessions.values():
            session.close()
    for name, us in p50.items():
        print(f"{name:>18}: {us:7.2f} us per call (p50)")
    print(f"{'the hooks cost':>18}: {p50['secrets (default)'] - p50['hooks off']:7.2f} us per call")
    for size in (250, 4_000, 30_000):
        text = ("lorem ipsum dolor sit amet, " * (size // 28 + 1))[:size]
        n = max(200, 2_000_000 // size)
        took = timeit.timeit(lambda text=text: redact_secrets(text), number=n) / n * 1e6
        print(f"redact_secrets, {size:>6} characters: {took:8.1f} us")


if __name__ == "__main__":
    main()
