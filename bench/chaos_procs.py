"""Processes of the chaos run (``bench/chaos.py``): the supervisor the harness plays, raw Celery
worker processes, the marked shell commands every call runs, and the scanner that finds their
processes (so orphans of killed attempts can be counted).

Every call's command exports ``CHAOS_RUN`` (one tag per run and system) and ``CHAOS_CALL`` (the
call id) before anything else, so each process it starts (the shell, its ``sleep``) carries the
call it belongs to in its environment.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil

REPO = Path(__file__).resolve().parent.parent
CELERY = str(Path(sys.executable).with_name("celery"))


# -- the commands --------------------------------------------------------------------------------


def call_command(run_tag: str, cid: str, sidefx: Path, first_s: float, rerun_s: float) -> str:
    """One line per run appended to the call's side-effect file, then a sleep: ``first_s`` on
    the first run, ``rerun_s`` when the file already had a line (a re-run that finds its work
    half done, as a build with a cache would). The sleep is the call's recognisable process."""
    path = sidefx / cid
    return (
        f"export CHAOS_RUN={run_tag} CHAOS_CALL={cid}; echo {cid} >> {path}; "
        f'if [ "$(wc -l < {path})" -gt 1 ]; then sleep {rerun_s:.2f}; '
        f"else sleep {first_s:.2f}; fi"
    )


def background_command(run_tag: str, cid: str, sidefx: Path, seconds: int) -> str:
    """Prints 1..N, one a second, and appends each number to its side-effect file: a command
    that continued through a worker loss leaves exactly 1..N there; a restarted one leaves
    1..k, 1..N."""
    path = sidefx / cid
    return (
        f"export CHAOS_RUN={run_tag} CHAOS_CALL={cid}; "
        f"for i in $(seq 1 {seconds}); do echo $i; echo $i >> {path}; sleep 1; done"
    )


def side_effect_lines(sidefx: Path, cid: str) -> int:
    try:
        return len((sidefx / cid).read_text().splitlines())
    except FileNotFoundError:
        return 0


# -- finding the calls' processes ----------------------------------------------------------------


@dataclass
class Seen:
    cid: str
    pid: int
    cmdline: str
    first: float
    last: float


class ProcessScanner(threading.Thread):
    """Samples every few hundred ms the live processes whose environment names ``run_tag``.
    ``seen`` maps (pid, create time) to when the process was first and last seen alive; a
    sample's time is taken before the scan starts, so ``last`` is a moment it surely lived."""

    NAMES = frozenset({"bash", "sh", "sleep", "seq", "wc"})

    def __init__(self, run_tag: str, every: float = 0.25) -> None:
        super().__init__(name=f"scanner-{run_tag}", daemon=True)
        self.run_tag = run_tag
        self.every = every
        self.seen: dict[tuple[int, float], Seen] = {}
        self.last_scan = 0.0
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def scan(self) -> list[Seen]:
        """One sample; returns the marked processes alive now."""
        t0 = time.time()
        alive: list[Seen] = []
        for proc in psutil.process_iter(["name", "status", "create_time"]):
            info = proc.info
            if info["name"] not in self.NAMES or info["status"] == psutil.STATUS_ZOMBIE:
                continue
            try:
                env = proc.environ()
            except (psutil.Error, OSError):
                continue
            if env.get("CHAOS_RUN") != self.run_tag:
                continue
            key = (proc.pid, info["create_time"] or 0.0)
            with self._lock:
                seen = self.seen.get(key)
                if seen is None:
                    try:
                        cmdline = " ".join(proc.cmdline())[:200]
                    except (psutil.Error, OSError):
                        cmdline = info["name"]
                    seen = self.seen[key] = Seen(
                        env.get("CHAOS_CALL", "?"), proc.pid, cmdline, t0, t0
                    )
                seen.last = t0
            alive.append(seen)
        self.last_scan = t0
        return alive

    def run(self) -> None:
        while not self._halt.wait(self.every):
            self.scan()

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(10)

    def processes_of(self, cid: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen.values() if s.cid == cid]

    def orphans(
        self, answered_at: dict[str, float | None], final_scan: float, grace: float = 0.5
    ) -> list[Seen]:
        """Processes seen alive more than ``grace`` after their call had its answer, or alive
        at the final scan (taken after the run ended)."""
        out = []
        with self._lock:
            for seen in self.seen.values():
                answered = answered_at.get(seen.cid)
                if seen.last >= final_scan or (
                    answered is not None and seen.last > answered + grace
                ):
                    out.append(seen)
        return out

    def kill_leftovers(self) -> int:
        """Clean up after the run (the counts are taken already): SIGKILL what is still alive."""
        count = 0
        for seen in self.scan():
            try:
                os.kill(seen.pid, signal.SIGKILL)
                count += 1
            except OSError:
                pass
        return count


def marked_descendants(pid: int, run_tag: str) -> list[psutil.Process]:
    """The processes under ``pid`` that belong to a call of ``run_tag``."""
    out = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return out
    for child in children:
        try:
            if child.environ().get("CHAOS_RUN") == run_tag:
                out.append(child)
        except (psutil.Error, OSError):
            pass
    return out


def ancestor_among(pid: int, candidates: dict[int, Any]) -> Any | None:
    """The candidate whose pid is ``pid`` or one of its ancestors, else None."""
    try:
        proc: psutil.Process | None = psutil.Process(pid)
    except psutil.Error:
        return None
    while proc is not None:
        if proc.pid in candidates:
            return candidates[proc.pid]
        try:
            proc = proc.parent()
        except psutil.Error:
            return None
    return None


# -- workers and the supervisor ------------------------------------------------------------------


class Worker(Protocol):
    name: str

    @property
    def alive(self) -> bool: ...

    @property
    def pid(self) -> int: ...

    def start(self) -> Any: ...

    def stop(self) -> None: ...


def is_ready(worker: Any) -> bool:
    heartbeat = getattr(worker, "heartbeat", None)
    if heartbeat is not None:  # a toolhub WorkerProcess
        try:
            return bool(worker.alive and Path(heartbeat).read_text().strip() == "ready")
        except FileNotFoundError:
            return False
    return bool(worker.alive and worker.ready())


def wait_all_ready(workers: list[Any], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(is_ready(w) for w in workers):
        if time.monotonic() > deadline:
            names = [w.name for w in workers if not is_ready(w)]
            raise TimeoutError(f"workers not ready: {names}")
        time.sleep(0.05)


class CeleryWorker:
    """One raw Celery worker process of ``bench/chaos_celery.py``'s app (threads pool)."""

    def __init__(
        self, name: str, url: str, home: Path, concurrency: int, queue: str, env: dict[str, str]
    ) -> None:
        self.name = name
        self.url = url
        self.home = home
        self.concurrency = concurrency
        self.queue = queue
        self.env = env
        self.log_path = home / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> CeleryWorker:
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = {
            **os.environ,
            **self.env,
            "CHAOS_CELERY_URL": self.url,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    CELERY,
                    "-A",
                    "bench.chaos_celery:app",
                    "worker",
                    "--pool=threads",
                    f"--concurrency={self.concurrency}",
                    f"--queues={self.queue}",
                    f"--hostname={self.name}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--loglevel=INFO",
                ],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def ready(self) -> bool:
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                return b" ready." in log.read()
        except FileNotFoundError:
            return False

    def signal(self, sig: signal.Signals) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@dataclass
class Exit:
    at: float
    name: str
    pid: int
    code: int | None
    planned: bool


@dataclass
class Supervisor:
    """What compose ``restart:`` or a Deployment would do: restart every worker that exits.
    Exits the harness caused (its SIGKILLs) are *planned*; any other exit (a worker that gave
    up after the Redis restart, a crash) is *unplanned* and counted. Restarts wait while the
    harness holds Redis down, so a worker is never started against a dead server."""

    workers: list[Any]
    redis_up: Callable[[], bool]
    exits: list[Exit] = field(default_factory=list)
    kills: list[tuple[float, str, int]] = field(default_factory=list)
    restarts: int = 0
    #: command processes under a killed worker still alive a second after its SIGKILL
    outlived: list[tuple[str, int, str]] = field(default_factory=list)
    marker: str = ""
    _planned: set[int] = field(default_factory=set)
    _reported: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> Supervisor:
        self._thread = threading.Thread(target=self._run, name="supervisor", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.check()

    def check(self) -> None:
        with self._lock:
            for worker in self.workers:
                if worker.alive or worker.proc is None:
                    continue
                pid = worker.pid
                if pid not in self._reported:
                    self._reported.add(pid)
                    self.exits.append(
                        Exit(
                            time.time(),
                            worker.name,
                            pid,
                            worker.proc.returncode,
                            pid in self._planned,
                        )
                    )
                if self.redis_up() and not self._stop.is_set():
                    worker.start()
                    self.restarts += 1

    def pick(self, rng: random.Random) -> Any | None:
        """A random live worker, preferring ready ones."""
        with self._lock:
            alive = [w for w in self.workers if w.alive]
            ready = [w for w in alive if is_ready(w)]
        pool = ready or alive
        return rng.choice(pool) if pool else None

    def kill(self, worker: Any) -> int | None:
        with self._lock:
            if not worker.alive:
                return None
            pid = worker.pid
            below = marked_descendants(pid, self.marker)
            self._planned.add(pid)
            os.kill(pid, signal.SIGKILL)
            self.kills.append((time.time(), worker.name, pid))
        timer = threading.Timer(1.0, self._check_outlived, args=(worker.name, below))
        timer.daemon = True
        timer.start()
        return pid

    def _check_outlived(self, name: str, below: list[psutil.Process]) -> None:
        for proc in below:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    self.outlived.append((name, proc.pid, " ".join(proc.cmdline())[:120]))
            except psutil.Error:
                pass

    @property
    def unplanned(self) -> list[Exit]:
        return [e for e in self.exits if not e.planned]

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.check()  # account for exits since the last pass (no restart: stopping)


@contextmanager
def supervised(
    workers: list[Any], redis_is_up: Callable[[], bool], run_tag: str
) -> Iterator[tuple[ProcessScanner, Supervisor]]:
    """Start ``workers`` under a supervisor and a process scanner; on exit stop both, kill what
    is left of the run's commands and stop the workers. Both systems run their phase in it."""
    scanner = ProcessScanner(run_tag)
    supervisor = Supervisor(workers, redis_is_up, marker=run_tag)
    try:
        for worker in workers:
            worker.start()
        wait_all_ready(workers)
        scanner.start()
        supervisor.start()
        yield scanner, supervisor
    finally:
        supervisor.stop()
        scanner.stop()
        scanner.kill_leftovers()
        for worker in workers:
            worker.stop()
