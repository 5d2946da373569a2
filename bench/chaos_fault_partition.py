"""Fault scenario ``partition`` (issue 45, part 3): one worker's Redis traffic is cut for 32 s
while it runs 25 s commands, under both ``fail`` and ``rerun``.

Three workers, a 4 s lease; the first reaches Redis through a TCP proxy that stops forwarding
(a partition: no reset, the worker's requests hang). With the other two paused for the moment,
it takes two commands of each policy; each command records ``start``/``end`` times in its
side-effect file and sleeps 25 s (2 s on a re-run). Ordinary calls go to the fleet during the
cut. Bars: every call answered (0 hung); ``fail`` calls answered ``worker_lost`` with
``may_have_run``, ``rerun`` calls answered by their re-run, announced (0 wrong); no lost
attempt alive once its re-run started, and none that ran to its end (0 overlaps: the worker
fenced itself); the cut-off worker serves calls again once the cut ends (recovery without a
restart).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.chaos_fault_fleet import Fleet, bash, runs_of, timed_command, work_dirs
from bench.chaos_faults import Verdict
from bench.chaos_procs import ProcessScanner
from toolhub import CallResult, Session

LEASE = 4.0
CUT_S = 32.0
FIRST_S = 25.0
RERUN_S = 2.0
PER_POLICY = 2


def _config(policy: str) -> dict[str, Any]:
    return {
        "tools": [
            {"id": "Main:bash", "on_worker_lost": policy},
            {"id": "Main:task_output"},
            {"id": "Main:kill_task"},
        ]
    }


def run(home: Path, say: Callable[[str], None]) -> Verdict:
    workspace, sidefx, run_tag = work_dirs(home, "part")
    say(f"starting redis and 3 workers (lease {LEASE:g} s; w1 behind a freezable proxy)")
    fleet = Fleet(home, workers=3, lease=LEASE, proxied=1)
    cut, others = fleet.workers[0], fleet.workers[1:]
    scanner = ProcessScanner(run_tag, every=0.1)
    sessions: dict[str, Session] = {}
    answers: dict[str, tuple[CallResult, float]] = {}

    def submit(policy: str, cid: str, command: str) -> threading.Thread:
        def call() -> None:
            result = sessions[policy].call_sync("bash", bash(command), call_id=cid)
            answers[cid] = (result, time.time())

        thread = threading.Thread(target=call, name=cid, daemon=True)
        thread.start()
        return thread

    try:
        for policy in ("fail", "rerun"):
            sessions[policy] = Session.connect(
                fleet.url, _config(policy), workspace, session_id=f"partition-{policy}"
            )
        scanner.start()
        long_calls = {
            f"{policy}-{i}": policy for policy in ("fail", "rerun") for i in range(PER_POLICY)
        }
        fleet.pause(others, True)
        try:
            threads = [
                submit(policy, cid, timed_command(run_tag, cid, sidefx, FIRST_S, RERUN_S))
                for cid, policy in long_calls.items()
            ]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not all(runs_of(sidefx, c) for c in long_calls):
                time.sleep(0.1)
        finally:
            fleet.pause(others, False)
        on_cut = {
            cid
            for cid, policy in long_calls.items()
            if str((sessions[policy].record_sync(cid) or {}).get("worker", "")).endswith(
                f":{cut.pid}"
            )
        }
        say(f"{len(on_cut)} of {len(long_calls)} long commands run on w1; cutting it off")
        proxy = fleet.proxies[0]
        proxy.freeze()
        cut_at = time.time()
        time.sleep(5)
        threads += [submit("fail", f"short-{i}", "echo ok") for i in range(6)]
        time.sleep(max(0.0, cut_at + CUT_S - time.time()))
        proxy.thaw()
        say(f"cut ended after {time.time() - cut_at:.1f} s")
        for thread in threads:
            thread.join(max(1.0, cut_at + 120 - time.time()))
        recovered = _served_by(fleet, cut, others, sessions["fail"])
        time.sleep(1.0)
        scanner.scan()
        return _score(long_calls, on_cut, answers, sidefx, scanner, cut_at, recovered, fleet)
    finally:
        scanner.stop()
        scanner.kill_leftovers()
        for session in sessions.values():
            session.close()
        fleet.stop()


def _served_by(fleet: Fleet, worker: Any, others: list[Any], session: Session) -> bool:
    """Whether ``worker`` (alive, never restarted) answers a call while the others pause."""
    pid = worker.pid
    fleet.pause(others, True)
    try:
        result = session.call_sync("bash", bash("echo back"), call_id="after-cut", timeout=60)
    except Exception:
        return False
    finally:
        fleet.pause(others, False)
    record = session.record_sync("after-cut") or {}
    return (
        not result.is_error
        and worker.alive
        and worker.pid == pid
        and str(record.get("worker", "")).endswith(f":{pid}")
    )


def _score(
    long_calls: dict[str, str],
    on_cut: set[str],
    answers: dict[str, tuple[CallResult, float]],
    sidefx: Path,
    scanner: ProcessScanner,
    cut_at: float,
    recovered: bool,
    fleet: Fleet,
) -> Verdict:
    verdict = Verdict("partition")
    hung = [cid for cid in [*long_calls, *(f"short-{i}" for i in range(6))] if cid not in answers]
    wrong: list[str] = []
    overlaps: list[str] = []
    ran_on: list[str] = []
    lived: list[float] = []
    for cid, policy in long_calls.items():
        if cid not in answers:
            continue
        result, _ = answers[cid]
        runs = runs_of(sidefx, cid)
        starts = [at for word, at in runs if word == "start"]
        lost = cid in on_cut
        first = [s for s in scanner.processes_of(cid) if f"sleep {FIRST_S:.2f}" in s.cmdline]
        first_last = max((s.last for s in first), default=0.0)
        if lost:
            lived.append(first_last - cut_at)
        if policy == "fail" and lost:
            error = result.error
            ok = (
                error is not None
                and error.code == "worker_lost"
                and (error.details or {}).get("may_have_run") is True
            )
            if len(runs) > 1:  # it never ends, and never runs again
                ran_on.append(cid)
        elif policy == "rerun" and lost:
            ok = not result.is_error and "attempt 2 of" in result.prompt_text
            if len(starts) > 1 and first_last >= starts[1]:
                overlaps.append(cid)
            if [w for w, _ in runs] != ["start", "start", "end"]:
                ran_on.append(cid)
        else:
            ok = not result.is_error
        if not ok:
            wrong.append(f"{cid}: {result.prompt_text[:120]}")
    fenced = fleet.workers[0].log_path.read_text(errors="replace").count("self-fencing")
    verdict.rows = {
        "lease / cut / command (s)": f"{LEASE:g} / {CUT_S:g} / {FIRST_S:g}",
        "long commands (fail + rerun) / on the cut worker": f"{len(long_calls)} / {len(on_cut)}",
        "calls answered / hung": f"{len(answers)} / {len(hung)}",
        "wrong answers": len(wrong),
        "lost attempts alive after their re-run began": len(overlaps),
        "lost attempts that ran on (end line, re-run)": len(ran_on),
        "lost attempt lived into the cut (s, max)": f"{max(lived, default=0.0):.1f}",
        "attempts the cut worker fenced (its log)": fenced,
        "cut worker serves again, same pid": recovered,
    }
    if hung:
        verdict.missed.append(f"hung: {hung}")
    if wrong:
        verdict.missed.append(f"wrong answers: {wrong}")
    if overlaps:
        verdict.missed.append(f"lost attempts overlapped their re-run: {overlaps}")
    if ran_on:
        verdict.missed.append(f"lost attempts ran on: {ran_on}")
    if not on_cut:
        verdict.missed.append("no long command ran on the cut worker")
    if not recovered:
        verdict.missed.append("the cut worker did not serve calls again")
    return verdict
