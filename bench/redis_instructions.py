"""What Redis executes for one distributed no-op call, in instructions: a measure of the call
protocol's scripts that other load on the machine does not move.

    .venv/bin/python bench/redis_instructions.py [--calls 200] [--top 12]

Latency and Redis's CPU time per call move by 20 % from one run to the next on a busy two-core
machine (``bench_critical_path.py``); a change to a Lua script that saves a few commands a call
cannot be seen there. Here one stack's ``redis-server`` runs under valgrind's callgrind (through
``TOOLHUB_REDIS_SERVER``, a wrapper script), instrumented only while ``--calls`` sequential
no-op calls run (one ``toolhub worker``, threads pool, concurrency 4). Prints the instructions
per call (the worker's own periodic commands in that window included, a few per cent) and the
functions that execute most of them, each with what it and its callees execute. Needs valgrind
(Debian: ``apt-get install valgrind``); Redis is some 50x slower under it, so a run takes about
a minute. Printed, not judged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redis import Redis  # noqa: E402

from tests.distributed.plugin_tools import CONFIG, make_builder  # noqa: E402
from tests.fixtures_stack import STACK_ENV, Stack  # noqa: E402
from toolhub import Session  # noqa: E402
from toolhub.stack.redis_server import find_redis_server  # noqa: E402

#: The functions whose inclusive counts say where a call's instructions go.
WATCHED = (
    "evalGenericCommand",
    "luaRedisGenericCommand",
    "hsetCommand",
    "hdelCommand",
    "hmgetCommand",
    "zaddGenericCommand",
    "blockingPopGenericCommand",
    "publishCommand",
    "__printf_fp_l",
    "json_encode",
    "json_decode",
)


def wrapper(folder: Path) -> Path:
    """A script that runs the usual ``redis-server`` under callgrind, uninstrumented until
    told (``callgrind_control -i on``)."""
    script = folder / "redis-under-callgrind"
    script.write_text(
        "#!/bin/sh\n"
        "exec valgrind --tool=callgrind --instr-atstart=no "
        f'--callgrind-out-file={folder}/callgrind.%p {find_redis_server()} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        print("valgrind is not installed (Debian: apt-get install valgrind): nothing measured")
        return 0
    folder = Path(tempfile.mkdtemp(prefix="bench-callgrind-"))
    production = {"TOOLHUB_LEASE_SECONDS": "15"}
    os.environ.update({**STACK_ENV, **production, "TOOLHUB_REDIS_SERVER": str(wrapper(folder))})
    stack = Stack(workers=1, env=production).start()
    session = Session.connect(stack.url, CONFIG, Path(tempfile.mkdtemp()), builder=make_builder())
    pid = str(Redis.from_url(stack.url).info("server")["process_id"])
    loop = asyncio.new_event_loop()
    try:
        for i in range(30):  # warm: connections, scripts loaded, the session's keys written
            loop.run_until_complete(session.call("noop", {}, call_id=f"warm-{i}"))
        control("-i", "on", pid)
        for i in range(args.calls):
            result = loop.run_until_complete(session.call("noop", {}, call_id=f"ri-{i}"))
            assert not result.is_error, result.prompt_text
        control("-i", "off", pid)
        control("-d", pid)
        dumps = _dumped(folder, pid)
    finally:
        session.close()
        loop.close()
        stack.stop()
    if not dumps:
        print("callgrind wrote no counts", file=sys.stderr)
        return 1
    total = _total(dumps[-1])
    print(f"Redis instructions per no-op call: {total / args.calls:,.0f}")
    print(f"({args.calls} sequential calls, one worker; the worker's periodic commands included)\n")
    print("| function (with its callees) | per call | share |")
    print("|---|---|---|")
    inclusive = _inclusive(dumps[-1])
    for name in WATCHED:
        count = inclusive.get(name)
        if count:
            print(f"| `{name}` | {count / args.calls:,.0f} | {count / total:.1%} |")
    print("\n| function (itself) | per call | share |")
    print("|---|---|---|")
    for name, count in _self(dumps[-1])[: args.top]:
        print(f"| `{name}` | {count / args.calls:,.0f} | {count / total:.1%} |")
    return 0


def control(*argv: str) -> None:
    subprocess.run(["callgrind_control", *argv], check=True, capture_output=True)


def _dumped(folder: Path, pid: str) -> list[Path]:
    """The dump files with counts, once callgrind has written them (a dump is asynchronous:
    it happens when Redis next runs), the largest last."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [path for path in folder.glob(f"callgrind.{pid}.*") if _total(path)]
        if found:
            return sorted(found, key=_total)
        time.sleep(0.2)
    return []


def _total(path: Path) -> int:
    """A dump's instruction count (its ``totals:`` line; ``summary:`` is 0 in a dump)."""
    counts = [
        int(line.split()[1])
        for line in path.read_text(errors="replace").splitlines()
        if line.startswith(("summary:", "totals:"))
    ]
    return max(counts, default=0)


_LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+)")


def _annotate(path: Path, *options: str) -> list[tuple[str, int]]:
    text = subprocess.run(
        ["callgrind_annotate", *options, str(path)], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and ":" in match.group(2):
            name = match.group(2).rsplit(":", 1)[1]
            rows.append((name, int(match.group(1).replace(",", ""))))
    return rows


def _inclusive(path: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for name, count in _annotate(path, "--inclusive=yes"):
        found.setdefault(name, count)
    return found


def _self(path: Path) -> list[tuple[str, int]]:
    return _annotate(path)


if __name__ == "__main__":
    raise SystemExit(main())
