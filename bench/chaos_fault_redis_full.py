"""Fault scenario ``redis_full`` (issue 45, part 4): Redis reaches its ``maxmemory`` (50 MB,
noeviction) for 45 s while background commands run.

Three workers (and their holders), a 4 s lease. Four background commands print and append
1..60 to their side-effect files, one number a second, and three foreground commands of 20 s
run too; then Redis is filled to 50 MB and held there, hovering (a write gets through now and
then, as under load: ``tests/distributed/redis_fill.py``), for 45 s; then the filler goes.
Bars: every command answered (0 hung) and ran once (its file holds 1..N once, one attempt, no
lost one: 0 unannounced duplicates, and no re-run at all); no task labelled "restarted after
its host was lost" (0 wrong answers); each worker said so once ("Redis is full") and ran on
without a restart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.chaos_fault_fleet import Fleet, bash, runs_of, timed_command, work_dirs
from bench.chaos_faults import Verdict
from bench.chaos_procs import background_command
from tests.distributed.redis_fill import Full
from toolhub import CallResult, Session

LEASE = 4.0
FULL_S = 45.0
MAXMEMORY = 50 * 1024 * 1024
BACKGROUND = 4
BACKGROUND_S = 60
FOREGROUND = 3
FOREGROUND_S = 20.0

CONFIG = {
    "tools": [
        {"id": "Main:bash", "params": {"enabled_background": True}},
        {"id": "Main:task_output"},
        {"id": "Main:wait_tasks"},
        {"id": "Main:kill_task"},
    ]
}


def run(home: Path, say: Callable[[str], None]) -> Verdict:
    workspace, sidefx, run_tag = work_dirs(home, "full")
    say(f"starting redis and 3 workers (lease {LEASE:g} s)")
    fleet = Fleet(home, workers=3, lease=LEASE)
    pids = [w.pid for w in fleet.workers]
    answers: dict[str, CallResult] = {}
    session: Session | None = None
    try:
        session = Session.connect(fleet.url, CONFIG, workspace)
        tasks: dict[str, str] = {}
        for i in range(BACKGROUND):
            cid = f"bg-{i}"
            command = background_command(run_tag, cid, sidefx, BACKGROUND_S)
            started = session.call_sync("bash", bash(command, is_background=True))
            if started.is_error or started.output is None:
                answers[cid] = started
                continue
            tasks[cid] = started.output.value["task_id"]
        threads = []
        for i in range(FOREGROUND):
            cid = f"fg-{i}"
            command = timed_command(run_tag, cid, sidefx, FOREGROUND_S, FOREGROUND_S)

            def call(cid: str = cid, command: str = command) -> None:
                answers[cid] = session.call_sync("bash", bash(command), call_id=cid)

            threads.append(threading.Thread(target=call, daemon=True))
            threads[-1].start()
        time.sleep(3)
        say(f"filling Redis to {MAXMEMORY >> 20} MB for {FULL_S:g} s")
        began = time.time()
        with Full(fleet.url, maxmemory=MAXMEMORY):
            time.sleep(FULL_S)
        say(f"Redis had room again after {time.time() - began:.1f} s")
        for thread in threads:
            thread.join(max(1.0, began + FULL_S + 60 - time.time()))
        wait_ms = int(max(1.0, began + BACKGROUND_S + 60 - time.time()) * 1000)
        session.call_sync(
            "wait_tasks",
            {"task_ids": list(tasks.values()), "mode": "wait_all", "timeout_ms": wait_ms},
        )
        shown = session.call_sync("task_output", {"task_ids": list(tasks.values())})
        records = {cid: session.record_sync(tid) or {} for cid, tid in tasks.items()}
        records.update({f"fg-{i}": session.record_sync(f"fg-{i}") or {} for i in range(FOREGROUND)})
        return _score(tasks, records, answers, shown, sidefx, fleet, pids)
    finally:
        if session is not None:
            session.close()
        fleet.stop()


def _score(
    tasks: dict[str, str],
    records: dict[str, dict[str, Any]],
    answers: dict[str, CallResult],
    shown: CallResult,
    sidefx: Path,
    fleet: Fleet,
    pids: list[int],
) -> Verdict:
    verdict = Verdict("redis_full")
    hung, twice, wrong = [], [], []
    expected = [str(i) for i in range(1, BACKGROUND_S + 1)]
    for cid in tasks:
        record = records[cid]
        status = record.get("status")
        if status in (None, "queued", "running"):
            hung.append(f"{cid}: {status}")
        elif status != "succeeded":
            wrong.append(f"{cid}: {status}")
        try:
            lines = (sidefx / cid).read_text().split()
        except FileNotFoundError:
            lines = []
        if lines != expected or len(record.get("attempts") or []) != 1 or record.get("lost"):
            twice.append(f"{cid}: {len(lines)} lines, attempts {len(record.get('attempts') or [])}")
    for i in range(FOREGROUND):
        cid = f"fg-{i}"
        result = answers.get(cid)
        if result is None:
            hung.append(cid)
        elif result.is_error:
            wrong.append(f"{cid}: {result.prompt_text[:120]}")
        if [w for w, _ in runs_of(sidefx, cid)] != ["start", "end"]:
            twice.append(f"{cid}: {runs_of(sidefx, cid)}")
    text = shown.prompt_text if not shown.is_error else ""
    if "host was lost" in text or "restarted" in text:
        wrong.append("a task is labelled restarted after its host was lost")
    logs = [w.log_path.read_text(errors="replace") for w in fleet.workers]
    said = [log.count("Redis is full") for log in logs]
    restarted = [w.name for w, pid in zip(fleet.workers, pids, strict=True) if w.pid != pid]
    alive = all(w.alive for w in fleet.workers)
    verdict.rows = {
        "lease / full for (s) / maxmemory": f"{LEASE:g} / {FULL_S:g} / {MAXMEMORY >> 20} MB",
        "background commands / foreground commands": f"{len(tasks)} / {FOREGROUND}",
        "hung": len(hung),
        "ran more than once or re-run": len(twice),
        "wrong answers (incl. 'host was lost')": len(wrong),
        "'Redis is full' lines per worker": said,
        "workers alive, none restarted": alive and not restarted,
    }
    for name, items in (("hung", hung), ("re-run", twice), ("wrong", wrong)):
        if items:
            verdict.missed.append(f"{name}: {items}")
    if any(count != 1 for count in said):
        verdict.missed.append(f"workers did not say once that Redis is full: {said}")
    if restarted or not alive:
        verdict.missed.append("a worker died or was restarted")
    return verdict
