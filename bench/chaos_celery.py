"""The vanilla-Celery side of the chaos run (``bench/chaos.py``), and its Celery app.

The app is what a careful Celery user would run: late acks, reject on worker lost, prefetch 1,
the threads pool, msgpack, a Redis result backend; everything else at Celery's defaults
(including the Redis visibility timeout, one hour). Its one task runs the call's shell command
in a subprocess, as toolhub's ``bash`` does. Workers: ``celery -A bench.chaos_celery:app``
with ``CHAOS_CELERY_URL`` naming the broker (the same Redis server as toolhub's, db 1).

Calls are ``apply_async`` (task id = call id), answers ``AsyncResult.get`` until the deadline;
what has not answered by then is hung. Celery cannot say that a task ran twice, so every
duplicated side effect counts as unsaid.
"""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Any

from celery import Celery

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

QUEUE = "chaos"

app = Celery(
    "chaos",
    broker=os.environ.get("CHAOS_CELERY_URL", "redis://127.0.0.1:6379/1"),
    backend=os.environ.get("CHAOS_CELERY_URL", "redis://127.0.0.1:6379/1"),
)
app.conf.update(
    task_serializer="msgpack",
    result_serializer="msgpack",
    accept_content=["msgpack"],
    result_accept_content=["msgpack"],
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_default_queue=QUEUE,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="chaos.run_command")
def run_command(command: str) -> dict[str, Any]:
    proc = subprocess.run(["bash", "-c", command], capture_output=True, timeout=600)
    return {"exit_code": proc.returncode, "output": proc.stdout[-2000:].decode(errors="replace")}


@contextmanager
def counted_unraisable(notes: list[str]) -> Iterator[None]:
    """Count the exceptions Celery's client raises in ``AsyncResult`` finalizers (after the
    Redis restart its result consumer gives up: "Retry limit exceeded ... must be restarted")
    into one note, instead of a traceback each on stderr; the ones raised later, when the
    interpreter exits, are dropped. Any other unraisable exception is reported as usual."""
    seen: Counter[str] = Counter()
    previous = sys.unraisablehook

    def count(unraisable: Any) -> None:
        if "AsyncResult.__del__" not in repr(unraisable.object):
            previous(unraisable)
        elif counting:
            error = unraisable.exc_value
            seen[" ".join(f"{type(error).__name__}: {error}".split())] += 1

    counting = True
    sys.unraisablehook = count
    try:
        yield
    finally:
        counting = False
        for text, times in seen.items():
            notes.append(f"Celery client errors in AsyncResult finalizers ({times}x): {text[:160]}")


class CeleryChaos:
    system = "Celery (acks_late + reject_on_worker_lost)"

    def __init__(self, profile: Any, home: Path, say: Any = print) -> None:
        self.profile = profile
        self.home = home
        self.say = say
        self.rng = random.Random(profile.seed)
        self.run_tag = f"chaos{os.getpid()}ce{int(time.time())}"
        self.sidefx = home / "sidefx-celery"
        self.sidefx.mkdir(parents=True, exist_ok=True)
        self.redis_down = threading.Event()
        self.results: dict[str, Any] = {}
        self.probe: dict[str, Any] | None = None
        self.submit_errors: dict[str, str] = {}
        self.redis_restarts = 0
        self.notes: list[str] = []

    def run(self, redis: Any = None) -> Any:
        from bench.chaos_procs import CeleryWorker, supervised
        from toolhub.stack import RedisServer

        own = redis is None
        self.redis = redis or RedisServer(persistent=True, data_dir=self.home / "redis").start()
        url = self.redis.url.rsplit("/", 1)[0] + "/1"
        app.conf.broker_url = url
        app.conf.result_backend = url
        self.workers = [
            CeleryWorker(f"celery{i + 1}", url, self.home, self.profile.concurrency, QUEUE, {})
            for i in range(self.profile.workers)
        ]
        try:
            with (
                supervised(self.workers, self.redis_is_up, self.run_tag) as (scanner, sup),
                counted_unraisable(self.notes),
            ):
                self.scanner, self.supervisor = scanner, sup
                try:
                    return self._run()
                finally:
                    self.results.clear()  # their finalizers raise once the backend gave up
                    gc.collect()
        finally:
            app.close()
            if own:
                self.redis.stop()

    def redis_is_up(self) -> bool:
        proc = self.redis.proc
        return not self.redis_down.is_set() and proc is not None and proc.poll() is None

    def _run(self) -> Any:
        from bench.chaos_plan import faults, make_calls, probe_calls

        p = self.profile
        assert run_command.apply_async(args=["true"], queue=QUEUE).get(timeout=30)
        began = time.time()
        calls = []
        if p.probe_burst:
            probe = probe_calls(p, 0)
            calls += probe
            for call in probe:
                self.submit(call)
            enqueued = time.time()
            time.sleep(self.rng.uniform(0.030, 0.090))
            victim = self.supervisor.pick(self.rng)
            self.probe = {
                "celery": True,
                "burst": len(probe),
                "delay_ms": (time.time() - enqueued) * 1000,
                "cids": {c.cid for c in probe},
            }
            if victim is not None:
                self.supervisor.kill(victim)
        planned = make_calls(p)
        calls += planned
        schedule = faults(p, background=False, dispatcher=False)
        self.start = time.time() + 1.0
        submitter = threading.Thread(target=self.submit_all, args=(planned,), name="submit")
        chaos = threading.Thread(target=self.chaos, args=(schedule,), name="chaos")
        submitter.start()
        chaos.start()
        submitter.join()
        chaos.join()
        self.deadline = self.last_fault + p.hung_after
        answered_at = self.collect(calls)
        time.sleep(1.0)
        final_scan = time.time()
        self.scanner.scan()
        return self.score(calls, answered_at, began, final_scan)

    def submit(self, call: Any) -> None:
        from bench.chaos_procs import call_command

        command = call_command(self.run_tag, call.cid, self.sidefx, call.first_s, call.rerun_s)
        try:
            self.results[call.cid] = run_command.apply_async(
                args=[command], task_id=call.cid, queue=QUEUE
            )
        except Exception as exc:  # the broker is down: the caller is told at once
            self.submit_errors[call.cid] = type(exc).__name__

    def submit_all(self, calls: list[Any]) -> None:
        for call in calls:
            time.sleep(max(0.0, self.start + call.at - time.time()))
            self.submit(call)

    def chaos(self, schedule: list[Any]) -> None:
        for fault in schedule:
            time.sleep(max(0.0, self.start + fault.at - time.time()))
            if fault.kind.startswith("kill"):
                victim = self.supervisor.pick(self.rng)
                if victim is not None:
                    self.supervisor.kill(victim)
            elif fault.kind == "redis":
                self.redis_down.set()
                try:
                    self.redis.kill()
                    time.sleep(self.profile.redis_outage)
                    self.redis.start()
                    self.redis_restarts += 1
                finally:
                    self.redis_down.clear()
        self.last_fault = time.time()

    def collect(self, calls: list[Any]) -> dict[str, float | None]:
        from celery.exceptions import TimeoutError as CeleryTimeout

        answered_at: dict[str, float | None] = {}
        self.get_errors: Counter[str] = Counter()
        self.states: dict[str, tuple[str, str]] = {}
        for call in calls:
            result = self.results.get(call.cid)
            if result is None:
                answered_at[call.cid] = None
                continue
            while True:
                remaining = self.deadline - time.time()
                try:
                    if remaining <= 0 and not result.ready():
                        break
                    result.get(timeout=max(remaining, 0.1), propagate=False)
                except CeleryTimeout:
                    break
                except Exception as exc:  # the backend is briefly down: ask again
                    self.get_errors[type(exc).__name__] += 1
                    time.sleep(0.5)
                    continue
                done = result.date_done
                if done is not None and done.tzinfo is None:
                    done = done.replace(tzinfo=UTC)
                answered_at[call.cid] = done.timestamp() if done is not None else time.time()
                code = "" if result.state == "SUCCESS" else type(result.result).__name__
                self.states[call.cid] = (result.state, code)
                break
            answered_at.setdefault(call.cid, None)
        if self.get_errors:
            self.notes.append(f"AsyncResult.get errors, retried: {dict(self.get_errors)}")
        return answered_at

    def score(
        self, calls: list[Any], answered_at: dict[str, float | None], began: float, scan: float
    ) -> Any:
        from bench.chaos_procs import side_effect_lines
        from bench.chaos_report import Outcome, Score

        outcomes = []
        for call in calls:
            outcome = Outcome(call.cid, lines=side_effect_lines(self.sidefx, call.cid))
            if call.cid in self.submit_errors:
                outcome.answered_at = self.start
                outcome.is_error = True
                outcome.code = f"submit: {self.submit_errors[call.cid]}"
            elif answered_at.get(call.cid) is not None:
                state, code = self.states[call.cid]
                outcome.answered_at = answered_at[call.cid]
                outcome.is_error = state != "SUCCESS"
                outcome.code = code
            outcomes.append(outcome)
        finished = max((o.answered_at or 0.0 for o in outcomes), default=began)
        if any(o.hung for o in outcomes):
            finished = max(finished, self.deadline)
        seen = list(self.scanner.seen.values())
        self.notes.append(
            f"the process scanner saw {len(seen)} processes of {len({s.cid for s in seen})} calls"
        )
        score = Score(
            self.system,
            outcomes,
            began,
            finished,
            orphans=self.scanner.orphans(answered_at, scan),
            worker_kills=len(self.supervisor.kills),
            redis_restarts=self.redis_restarts,
            workers_lost=self.supervisor.unplanned,
            outlived=self.supervisor.outlived,
            notes=self.notes,
        )
        if self.probe is not None:
            cids = self.probe.pop("cids")
            self.probe["hung"] = sum(1 for o in outcomes if o.cid in cids and o.hung)
            score.probe = self.probe
        return score
