"""Fault scenario ``disk`` (issue 45, part 1): ``TOOLHUB_HOME`` on a full disk.

``TOOLHUB_HOME`` of two real workers is a 6 MiB tmpfs (``mount -t tmpfs``; skipped with a note
where mounting is refused). 20 calls printing 1 MB each and 20 ordinary calls go out at once:
the command logs fill the disk within a few calls. Every call must be answered within 60 s:
either right (exit 0 with all of its output, its log whole) or with a typed error
(``output_log_incomplete``: the command ran, its log was cut; ``start_failed``: nothing ran);
never "exit: 0" with output or a log silently cut. Then the logs are deleted (the space is
back, unless a process still holds a deleted log open) and 20 new calls must all be answered,
by the same worker processes: recovery without a restart.

    .venv/bin/python bench/chaos.py --no-main --faults disk

Threat: a worker whose reader thread dies on a write error never answers, keeps the call's
lease alive, and once every pool thread holds such a call takes nothing more.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.chaos_dispatcher import CONFIG, bash_args  # noqa: E402
from bench.chaos_faults import Verdict  # noqa: E402
from toolhub import CallResult, Session  # noqa: E402

BIG_BYTES = 1_000_000
#: Free bytes under which the disk counts as full after the first phase.
FULL_BELOW = 256 << 10
LEASE_S = 4.0
#: Typed answers that say what ran and what was lost.
TYPED = {"output_log_incomplete", "start_failed"}


@dataclass(frozen=True)
class Load:
    """The fleet and the calls: the issue's by default; ``make test`` runs a smaller one."""

    workers: int = 2
    disk: str = "6m"
    big_calls: int = 20
    ordinary_calls: int = 20
    after_calls: int = 20
    after_bytes: int = 100_000
    hung_after_s: float = 60.0


def printing(n: int, tag: str) -> str:
    """A command printing ``n`` bytes, then a newline and its tag: ``n + len(tag) + 2`` bytes."""
    return f"head -c {n} /dev/zero | tr '\\0' x; echo; echo {tag}"


def judge(result: CallResult | None, tag: str, size: int) -> str:
    """``right``, ``typed`` (a typed error naming what was lost), ``hung``, or why it is wrong."""
    if result is None:
        return "hung"
    if result.is_error:
        error = result.error
        code = None if error is None else str(error.code or "")
        if code == "call_timeout" or (error is not None and error.kind.value == "timeout"):
            return "hung"
        return "typed" if code in TYPED else f"untyped error ({code or (error and error.kind)})"
    value = result.output.value if result.output is not None else {}
    if not isinstance(value, dict) or value.get("exit_code") != 0:
        return f"wrong: exit {value.get('exit_code') if isinstance(value, dict) else '?'}"
    expected = size + len(tag) + 2
    if value.get("total_bytes") != expected or tag not in str(value.get("output", "")):
        seen = tag in str(value)
        return f"wrong: {value.get('total_bytes')} of {expected} bytes, tag seen: {seen}"
    log = value.get("log_path")
    if log and os.path.exists(log) and os.path.getsize(log) < expected:
        return f"wrong: log holds {os.path.getsize(log)} of {expected} bytes"
    return "right"


def held_deleted(pids: list[int], mount: Path) -> int:
    """Descriptors these processes hold on deleted files under ``mount``."""
    held = 0
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith(str(mount)) and target.endswith("(deleted)"):
                held += 1
    return held


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def run(home: Path, say: Callable[[str], None], load: Load | None = None) -> Verdict:
    load = load or Load()
    verdict = Verdict("disk")
    mount = home / "toolhub-home"
    mount.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={load.disk}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        verdict.rows["skipped"] = f"mount refused: {mounted.stderr.strip() or mounted.returncode}"
        return verdict
    try:
        return _run(home, mount, load, verdict, say)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _run(
    home: Path, mount: Path, load: Load, verdict: Verdict, say: Callable[[str], None]
) -> Verdict:
    from tests.fixtures_stack import STACK_ENV, WorkerProcess
    from toolhub.distributed.shared import close_shared_backends
    from toolhub.stack import RedisServer

    env = {**STACK_ENV, "TOOLHUB_LEASE_SECONDS": f"{LEASE_S:g}"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    redis = RedisServer(data_dir=home / "redis").start()
    logs = home / "workers"
    logs.mkdir(exist_ok=True)
    workers = [
        WorkerProcess(
            f"disk{i + 1}",
            redis.url,
            logs,
            concurrency=4,
            env={"TOOLHUB_HOME": str(mount), "TOOLHUB_LEASE_SECONDS": f"{LEASE_S:g}"},
        )
        for i in range(load.workers)
    ]
    workspace = home / "ws"
    workspace.mkdir(exist_ok=True)
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
        pids = [w.pid for w in workers]
        session = Session.connect(redis.url, CONFIG, workspace, session_id="disk")
        try:
            _phases(session, mount, pids, load, verdict, say)
        finally:
            session.close()
        restarted = [w.name for w, pid in zip(workers, pids, strict=True) if w.pid != pid]
        dead = [w.name for w in workers if not w.alive]
        verdict.rows["workers died or restarted"] = len(set(restarted + dead))
        if restarted or dead:
            verdict.missed.append(f"workers died or restarted: {sorted(set(restarted + dead))}")
    finally:
        close_shared_backends()
        for worker in workers:
            worker.stop()
        redis.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return verdict


def _calls(
    session: Session,
    calls: list[tuple[str, str, int]],
    hung_after_s: float,
    say: Callable[[str], None],
) -> dict[str, str]:
    """Run ``(call id, tag, size)`` calls at once; each one's judgement by call id."""

    def one(call: tuple[str, str, int]) -> tuple[str, str]:
        cid, tag, size = call
        try:
            result: Any = session.call_sync(
                "bash", bash_args(printing(size, tag)), call_id=cid, timeout=hung_after_s
            )
        except Exception as exc:  # the harness's own failure is a wrong answer, said
            return cid, f"wrong: the call raised {type(exc).__name__}: {exc}"
        return cid, judge(result, tag, size)

    with ThreadPoolExecutor(len(calls)) as pool:
        judged = dict(pool.map(one, calls))
    for cid, verdict in sorted(judged.items()):
        if verdict not in ("right", "typed"):
            say(f"  {cid}: {verdict}")
    return judged


def _phases(
    session: Session,
    mount: Path,
    pids: list[int],
    load: Load,
    verdict: Verdict,
    say: Callable[[str], None],
) -> None:
    stamp = int(time.time())
    warm = session.call_sync("bash", bash_args("true"), call_id=f"disk-warm-{stamp}")
    if warm.is_error:
        verdict.missed.append(f"warm-up call failed: {warm.prompt_text[:200]}")
        return
    calls = []
    for i in range(max(load.big_calls, load.ordinary_calls)):
        if i < load.big_calls:
            calls.append((f"disk-big-{stamp}-{i}", f"END-big-{i}", BIG_BYTES))
        if i < load.ordinary_calls:
            calls.append((f"disk-small-{stamp}-{i}", f"END-small-{i}", 10))
    began = time.monotonic()
    full = _calls(session, calls, load.hung_after_s, say)
    counts = Counter(v if v in ("right", "typed", "hung") else "wrong" for v in full.values())
    verdict.rows["full disk: calls"] = len(calls)
    verdict.rows["full disk: answered right"] = counts["right"]
    verdict.rows["full disk: typed errors (what ran, what was lost)"] = counts["typed"]
    verdict.rows["full disk: wrong answers"] = counts["wrong"]
    verdict.rows[f"full disk: hung (no answer in {load.hung_after_s:g} s)"] = counts["hung"]
    verdict.rows["full disk: seconds"] = round(time.monotonic() - began, 1)
    free_while_full = free_bytes(mount)
    verdict.rows["free bytes while full"] = free_while_full

    logs = [log for log in mount.rglob("*.log") if log.parent.name == "terminal"]
    for log in logs:
        log.unlink()
    verdict.rows["command logs deleted"] = len(logs)
    time.sleep(1.0)
    verdict.rows["free bytes after deleting the logs"] = free_bytes(mount)
    held = held_deleted(pids, mount)
    verdict.rows["deleted logs still held open"] = held

    calls = [
        (f"disk-after-{stamp}-{i}", f"END-after-{i}", load.after_bytes)
        for i in range(load.after_calls)
    ]
    began = time.monotonic()
    after = _calls(session, calls, load.hung_after_s, say)
    right = sum(v == "right" for v in after.values())
    verdict.rows["space back: calls answered right"] = f"{right} of {len(calls)}"
    verdict.rows["space back: seconds"] = round(time.monotonic() - began, 1)

    if free_while_full > FULL_BELOW:
        verdict.missed.append("the disk never filled")
    if counts["hung"]:
        verdict.missed.append(f"{counts['hung']} hung")
    if counts["wrong"]:
        verdict.missed.append(f"{counts['wrong']} wrong answers")
    if held:
        verdict.missed.append(f"{held} deleted logs still held open")
    if right < len(calls):
        verdict.missed.append(f"after freeing space only {right} of {len(calls)} answered right")
