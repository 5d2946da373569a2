"""Fault scenario ``failover`` (issue 44): the Redis primary dies twice under load; Sentinel
promotes its replica each time.

A primary, a replica and three Sentinels (``tests/sentinel_set.py``, the same ``redis-server``
binary), three workers and one dispatcher session given only the Sentinel URL, a 10 s lease.
Long commands (each appends ``start``/``end`` to its own side-effect file) run while a steady
stream of short calls goes on; the primary is SIGKILLed, comes back (as a replica of the new
one), and the new primary is SIGKILLed in its turn. Bars: every call answered (0 hung, 0
lost: an answer and a record for each), no command ran twice unless its answer says so (0
unannounced re-runs), no worker restarted, and the time from each kill to the next call that
worked (printed, with the Sentinels' promotion time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.chaos_fault_fleet import bash, runs_of, timed_command, work_dirs
from bench.chaos_faults import Verdict
from tests.fixtures_stack import WorkerProcess
from tests.sentinel_set import SentinelSet
from toolhub import CallResult, Session
from toolhub.distributed.shared import close_shared_backends

LEASE = 10.0
WORKERS = 3
LONG = 12
LONG_S = 8.0
SHORT_EVERY_S = 0.05
CONFIG = {"tools": [{"id": "Main:bash", "params": {"enabled_background": False}}]}


class Stream(threading.Thread):
    """Short calls one after another, each answer kept with the time it was sent."""

    def __init__(self, session: Session) -> None:
        super().__init__(daemon=True)
        self.session = session
        self.halt = threading.Event()
        self.answers: list[tuple[float, float, CallResult]] = []

    def run(self) -> None:
        n = 0
        while not self.halt.is_set():
            n += 1
            sent = time.monotonic()
            result = self.session.call_sync("bash", bash(f"echo short{n}"))
            self.answers.append((sent, time.monotonic(), result))
            time.sleep(SHORT_EVERY_S)

    def first_ok_after(self, moment: float) -> float | None:
        done = [at for sent, at, r in self.answers if sent >= moment and not r.is_error]
        return min(done) - moment if done else None


def run(home: Path, say: Callable[[str], None]) -> Verdict:
    workspace, sidefx, run_tag = work_dirs(home, "failover")
    redis = SentinelSet(home / "redis").start()
    say(f"primary, replica, 3 sentinels up; {WORKERS} workers (lease {LEASE:g} s)")
    workers = []
    for i in range(WORKERS):
        (home / f"w{i}").mkdir(exist_ok=True)
        workers.append(
            WorkerProcess(
                f"w{i}", redis.url, home / f"w{i}", env={"TOOLHUB_LEASE_SECONDS": f"{LEASE:g}"}
            ).start()
        )
    for worker in workers:
        worker.wait_ready()
    pids = [w.pid for w in workers]
    session = Session.connect(redis.url, CONFIG, workspace)
    stream = Stream(session)
    answers: dict[str, CallResult] = {}
    kills: list[tuple[float, float]] = []
    try:
        stream.start()
        for round_ in range(2):
            threads = []
            for i in range(LONG // 2):
                cid = f"long{round_}-{i}"
                command = timed_command(run_tag, cid, sidefx, LONG_S, 1.0)

                def call(cid: str = cid, command: str = command) -> None:
                    answers[cid] = session.call_sync("bash", bash(command), call_id=cid)

                threads.append(threading.Thread(target=call, daemon=True))
                threads[-1].start()
            time.sleep(3)
            old, new = redis.kill_primary()
            killed = time.monotonic()
            promoted = redis.wait_agreed(new, 60)
            kills.append((killed, promoted))
            say(f"failover {round_ + 1}: primary :{old} killed, :{new} promoted in {promoted:.1f}s")
            for thread in threads:
                thread.join(LONG_S + 4 * LEASE + 60)
            redis.restart(old)
        time.sleep(2)
        stream.halt.set()
        stream.join(60)
        records = {cid: session.record_sync(cid) or {} for cid in answers}
        return _score(answers, records, stream, kills, sidefx, workers, pids)
    finally:
        stream.halt.set()
        session.close()
        close_shared_backends()
        for worker in workers:
            worker.stop()
        redis.stop()


def _score(
    answers: dict[str, CallResult],
    records: dict[str, dict[str, object]],
    stream: Stream,
    kills: list[tuple[float, float]],
    sidefx: Path,
    workers: list[WorkerProcess],
    pids: list[int],
) -> Verdict:
    verdict = Verdict("failover")
    hung, lost, unannounced, errors = [], [], [], []
    for i in range(2 * (LONG // 2)):
        cid = f"long{i // (LONG // 2)}-{i % (LONG // 2)}"
        result = answers.get(cid)
        if result is None:
            hung.append(cid)
            continue
        if not records.get(cid):
            lost.append(cid)
        starts = [w for w, _ in runs_of(sidefx, cid)].count("start")
        details = (result.error.details if result.error else None) or {}
        announced = bool(details.get("may_have_run")) or "re-run" in result.prompt_text
        if starts > 1 and not announced:
            unannounced.append(f"{cid}: {starts} runs")
        if result.is_error:
            errors.append(f"{cid}: {result.error.code if result.error else '?'}")
    short_errors = [r.error.code for _, _, r in stream.answers if r.error is not None]
    recover = [stream.first_ok_after(killed) for killed, _ in kills]
    restarted = [
        w.name for w, pid in zip(workers, pids, strict=True) if not w.alive or w.pid != pid
    ]
    verdict.rows = {
        "lease / failovers": f"{LEASE:g} s / {len(kills)}",
        "long commands / short calls": f"{len(answers)} / {len(stream.answers)}",
        "promotion by Sentinel (s)": [round(p, 1) for _, p in kills],
        "first call answered after each kill (s)": [
            round(r, 1) if r is not None else None for r in recover
        ],
        "hung": len(hung),
        "lost (no record)": len(lost),
        "re-runs unannounced": len(unannounced),
        "long commands answered with an error": errors or 0,
        "short calls answered with an error": _counts(short_errors) or 0,
        "workers alive, none restarted": not restarted,
    }
    for name, items in (("hung", hung), ("lost", lost), ("unannounced re-run", unannounced)):
        if items:
            verdict.missed.append(f"{name}: {items}")
    if any(r is None for r in recover):
        verdict.missed.append("no call worked after a failover")
    if restarted:
        verdict.missed.append(f"workers died or restarted: {restarted}")
    return verdict


def _counts(codes: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for code in codes:
        out[code] = out.get(code, 0) + 1
    return out
