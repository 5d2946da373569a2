"""The toolhub side of the chaos run (``bench/chaos.py``): real workers under a supervisor,
the take-before-claim probe, the main load with its faults, and the score.

The calls themselves are submitted by a dispatcher process (``bench/chaos_dispatcher.py``),
so that the dispatcher can be SIGKILLed too.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import chaos_probe  # noqa: E402
from bench.chaos_dispatcher import (  # noqa: E402
    CONFIG,
    bash_args,
    read_answers,
    start_dispatcher,
)
from bench.chaos_plan import Profile, faults, last_fault_at, make_calls  # noqa: E402
from bench.chaos_procs import (  # noqa: E402
    ancestor_among,
    background_command,
    side_effect_lines,
    supervised,
    wait_all_ready,
)
from bench.chaos_report import Outcome, Score, is_worker_lost  # noqa: E402
from toolhub import Session  # noqa: E402


class ToolhubChaos:
    """One toolhub phase: a persistent Redis, ``profile.workers`` toolhub workers, the probe,
    then the main load with its faults; returns the score."""

    system = "toolhub"

    def __init__(self, profile: Profile, home: Path, say: Any = print) -> None:
        self.profile = profile
        self.home = home
        self.say = say
        self.rng = random.Random(profile.seed)
        self.run_tag = f"chaos{os.getpid()}th{int(time.time())}"
        self.workdir = home / "dispatch"
        self.workspace = home / "ws"
        # Inside the workspace: workers sandbox commands, so a side effect can only land there.
        self.sidefx = self.workspace / "sidefx"
        for path in (self.sidefx, self.workdir, self.workspace):
            path.mkdir(parents=True, exist_ok=True)
        self.redis_down = threading.Event()
        self.answers: dict[str, dict[str, Any]] = {}
        self.probes: list[dict[str, Any]] = []
        self.background: dict[str, Any] | None = None
        self.dispatcher_kills = 0
        self.redis_restarts = 0
        self.notes: list[str] = []

    def run(self, redis: Any = None) -> Score:
        """``redis``: a started ``RedisServer`` (db 0 is used); without one, an own one."""
        from tests.fixtures_stack import STACK_ENV, WorkerProcess
        from toolhub.distributed.shared import close_shared_backends
        from toolhub.stack import RedisServer

        own = redis is None
        self.redis = redis or RedisServer(persistent=True, data_dir=self.home / "redis").start()
        self.url = self.redis.url
        env = {**STACK_ENV, "TOOLHUB_LEASE_SECONDS": f"{self.profile.lease:g}"}
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        logs = self.home / "workers"
        logs.mkdir(exist_ok=True)
        self.workers = [
            WorkerProcess(
                f"w{i + 1}",
                self.url,
                logs,
                concurrency=self.profile.concurrency,
                env={"TOOLHUB_LEASE_SECONDS": env["TOOLHUB_LEASE_SECONDS"]},
            )
            for i in range(self.profile.workers)
        ]
        try:
            with supervised(self.workers, self.redis_is_up, self.run_tag) as (scanner, sup):
                self.scanner, self.supervisor = scanner, sup
                return self._run()
        finally:
            close_shared_backends()
            if own:
                self.redis.stop()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def redis_is_up(self) -> bool:
        proc = self.redis.proc
        return not self.redis_down.is_set() and proc is not None and proc.poll() is None

    def _run(self) -> Score:
        p = self.profile
        self.session = Session.connect(self.url, CONFIG, self.workspace, session_id="chaos")
        self.store = self.session.executor.store  # type: ignore[attr-defined]
        try:
            warm = self.session.call_sync("bash", bash_args("true"), call_id="warmup")
            assert not warm.is_error, warm.prompt_text
            began = time.time()
            if p.probe_burst:
                for attempt in range(p.probe_tries):
                    probe = chaos_probe.take_before_claim(self, attempt)
                    self.probes.append(probe)
                    if probe["taken"]:
                        break
                    self.say(
                        f"probe {attempt}: no message was caught between its take and its "
                        f"claim ({len(probe['candidates'])} candidates at the kill)"
                    )
                wait_all_ready(self.workers)
            self.main_phase()
            time.sleep(1.0)
            final_scan = time.time()
            self.scanner.scan()
            return self.score(began, final_scan)
        finally:
            self.session.close()

    # -- the main load with its faults --------------------------------------------------------

    def main_phase(self) -> None:
        p = self.profile
        calls = make_calls(p)
        schedule = faults(p, background=p.background_seconds > 0, dispatcher=True)
        self.start = time.time() + 3.0
        self.deadline = self.start + last_fault_at(p, schedule) + p.hung_after
        self.planned = calls
        plan = {
            "url": self.url,
            "workspace": str(self.workspace),
            "session_id": "chaos",
            "sidefx": str(self.sidefx),
            "run_tag": self.run_tag,
            "start": self.start,
            "deadline": self.deadline,
            "calls": [c.to_dict() for c in calls],
        }
        (self.workdir / "plan.json").write_text(json.dumps(plan))
        self.dispatchers = [start_dispatcher(self.workdir, 0)]
        chaos = threading.Thread(target=self.chaos, args=(schedule,), name="chaos")
        time.sleep(max(0.0, self.start - time.time()))
        if p.background_seconds:
            self.start_background()
        chaos.start()
        chaos.join()
        while self.dispatchers[-1].poll() is None and time.time() < self.deadline + 30:
            time.sleep(0.2)
        if self.dispatchers[-1].poll() is None:
            self.notes.append("the last dispatcher did not finish by the deadline; killed")
            self.dispatchers[-1].kill()
        self.dispatchers[-1].wait()
        if self.background is not None:
            self.finish_background()
        self.answers.update(read_answers(self.workdir))

    def chaos(self, schedule: list[Any]) -> None:
        for fault in schedule:
            time.sleep(max(0.0, self.start + fault.at - time.time()))
            try:
                getattr(self, "fault_" + fault.kind.replace("-", "_"))()
            except Exception as exc:  # a fault that could not be applied is reported
                self.notes.append(f"fault {fault.kind} at {fault.at:g} s failed: {exc!r}")
        self.last_fault = time.time()

    def fault_kill(self) -> None:
        victim = self.supervisor.pick(self.rng)
        if victim is not None:
            self.supervisor.kill(victim)

    def fault_kill_background(self) -> None:
        bg = self.background
        if bg is None:
            return self.fault_kill()
        limit = time.time() + 10
        while side_effect_lines(self.sidefx, bg["cid"]) < 2 and time.time() < limit:
            time.sleep(0.05)
        workers = {w.pid: w for w in self.workers if w.alive}
        victim = None
        for seen in self.scanner.scan():
            if seen.cid == bg["cid"]:
                victim = ancestor_among(seen.pid, workers)
                if victim is not None:
                    break
        if victim is None:  # not a descendant of a worker: the worker its record names
            record = self.session.record_sync(bg["task_id"]) or {}
            pid = int(str(record.get("worker", ":0")).rsplit(":", 1)[-1] or 0)
            victim = workers.get(pid)
            bg["holder"] = "record" if victim is not None else "unknown"
        else:
            bg["holder"] = "ancestor"
        if victim is None:
            self.notes.append("background: no worker holds it; killed a random one")
            return self.fault_kill()
        self.supervisor.kill(victim)
        bg["killed_after"] = time.time() - bg["started"]
        return None

    def fault_redis(self) -> None:
        self.redis_down.set()
        try:
            self.redis.kill()
            time.sleep(self.profile.redis_outage)
            self.redis.start()
            self.redis_restarts += 1
            self.redis_back = time.time()
        finally:
            self.redis_down.clear()

    def fault_dispatcher(self) -> None:
        old = self.dispatchers[-1]
        old.kill()
        old.wait()
        self.dispatcher_kills += 1
        self.dispatchers.append(start_dispatcher(self.workdir, len(self.dispatchers)))

    # -- the background command ---------------------------------------------------------------

    def start_background(self) -> None:
        n = self.profile.background_seconds
        cid = "bg"
        command = background_command(self.run_tag, cid, self.sidefx, n)
        started = time.time()
        result = self.session.call_sync(
            "bash", {**bash_args(command), "is_background": True}, call_id="bg-start"
        )
        if result.is_error:
            self.background = None
            self.notes.append(f"background start failed: {result.prompt_text[:200]}")
            return
        self.background = {
            "cid": cid,
            "n": n,
            "task_id": result.output.value["task_id"],
            "started": started,
        }

    def finish_background(self) -> None:
        bg = self.background
        assert bg is not None
        tid = bg["task_id"]
        n = bg["n"]
        wait_ms = int(max(1.0, self.deadline - time.time()) * 1000)
        self.session.call_sync(
            "wait_tasks", {"task_ids": [tid], "mode": "wait_all", "timeout_ms": wait_ms}
        )
        shown = self.session.call_sync("task_output", {"task_ids": [tid]})
        if shown.is_error:
            bg["error"] = shown.prompt_text[:200]
            return
        tasks = shown.output.value.get("tasks") or [{}]
        snap = tasks[0]
        expected = [str(i) for i in range(1, n + 1)]
        output = (snap.get("output") or "").split()
        sidefx = (self.sidefx / bg["cid"]).read_text().split()
        record = self.session.record_sync(tid) or {}
        bg.update(
            status=snap.get("status"),
            output=" ".join(output),
            output_ok=output == expected and snap.get("status") == "exited",
            sidefx=" ".join(sidefx),
            ran_once=sidefx == expected,
            attempts=len(record.get("attempts") or []),
            finished_at=record.get("finished_at"),
        )

    # -- scoring ------------------------------------------------------------------------------

    def score(self, began: float, final_scan: float) -> Score:
        cids = [c for probe in self.probes for c in probe["cids"]]
        cids += [c.cid for c in self.planned]
        records = {cid: self.session.record_sync(cid) for cid in cids}
        outcomes = []
        answered_at: dict[str, float | None] = {}
        for cid in cids:
            answer, record = self.answers.get(cid), records.get(cid) or {}
            outcome = Outcome(cid, lines=side_effect_lines(self.sidefx, cid))
            if answer is not None:
                error = answer["error"]
                outcome.answered_at = min(answer["t"], record.get("finished_at") or answer["t"])
                outcome.is_error = error is not None
                outcome.code = (error or {}).get("code") or (error or {}).get("kind") or ""
                outcome.said_rerun = int(record.get("lost") or 0) > 0 or is_worker_lost(error)
            outcomes.append(outcome)
            answered_at[cid] = outcome.answered_at
        bg = self.background
        if bg is not None:
            answered_at[bg["cid"]] = bg.get("finished_at")
        finished = max((o.answered_at or 0.0 for o in outcomes), default=began)
        if any(o.hung for o in outcomes):
            finished = max(finished, self.deadline)
        score = Score(
            self.system,
            outcomes,
            began,
            finished,
            orphans=self.scanner.orphans(answered_at, final_scan),
            worker_kills=len(self.supervisor.kills),
            redis_restarts=self.redis_restarts,
            dispatcher_kills=self.dispatcher_kills,
            workers_lost=self.supervisor.unplanned,
            outlived=self.supervisor.outlived,
            background=bg,
            notes=self.notes,
        )
        score.probe = chaos_probe.summary(self.probes, records, outcomes, self.profile.lease)
        seen = list(self.scanner.seen.values())
        score.notes.append(
            f"the process scanner saw {len(seen)} processes of {len({s.cid for s in seen})} calls"
        )
        adopted = sum(1 for a in self.answers.values() if a["via"] == "follow")
        resubmitted = sum(1 for a in self.answers.values() if a["via"] == "successor-submit")
        score.notes.append(
            f"the successor dispatcher collected {adopted} answers by id and submitted "
            f"{resubmitted} logged-but-undispatched calls (re-submits of dispatched calls: none "
            f"by construction; {self.duplicate_dispatches()} call ids dispatched twice)"
        )
        return score

    def duplicate_dispatches(self) -> int:
        ids = (self.workdir / "submitted.log").read_text().split()
        return len(ids) - len(set(ids))
