"""A worker cut off from Redis stops its commands before its lease can end (self-fencing).

Real parts: a redis-server, a worker P whose every connection to it (Celery's, the store's,
its holder's) goes through a TCP proxy the test freezes (a partition: bytes stop, nothing is
reset), and a worker D straight on Redis that sweeps and re-runs. Each command appends a
``start`` line to its side-effect file, sleeps (long on its first run, a second on a re-run)
and appends ``end``; a sampler watches the first run's ``sleep``. Shown: under ``fail`` the
caller's ``worker_lost`` ("may have partly run") comes after the first run's processes are
gone and that run never ends; under ``rerun`` (and for a background command, re-run by its
holder on the other host) the lost run is gone before its re-run starts.
"""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_stack import WorkerProcess
from tests.processes import tagged_sleeps
from tests.tcp_proxy import FreezableProxy
from toolhub import Session
from toolhub.distributed.shared import close_shared_backends
from toolhub.stack import RedisServer

LEASE = 3.0
FIRST_S = 20


class Fleet:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.redis = RedisServer(data_dir=home / "redis").start()
        self.proxy = FreezableProxy(("127.0.0.1", self.redis.port))
        env = {"TOOLHUB_LEASE_SECONDS": f"{LEASE:g}"}
        # Own homes: a holder is per (home, URL), so each worker keeps its own.
        (home / "p").mkdir()
        (home / "d").mkdir()
        self.p = WorkerProcess("p", self.proxy.url(), home / "p", concurrency=2, env=env)
        self.d = WorkerProcess("d", self.redis.url, home / "d", concurrency=2, env=env)
        for worker in (self.p, self.d):
            worker.start()
        for worker in (self.p, self.d):
            worker.wait_ready()

    def heal(self) -> None:
        self.proxy.thaw()
        self.d.signal(signal.SIGCONT)
        if not self.p.alive:
            self.p.start().wait_ready()

    def stop(self) -> None:
        self.proxy.thaw()
        close_shared_backends()
        for worker in (self.p, self.d):
            worker.signal(signal.SIGCONT)
            worker.stop()
        self.proxy.close()
        self.redis.stop()


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    home = Path(tempfile.mkdtemp(prefix="toolhub-partition-"))
    with pytest.MonkeyPatch.context() as patch:  # this process's dispatcher: the same lease
        patch.setenv("TOOLHUB_LEASE_SECONDS", f"{LEASE:g}")
        built = Fleet(home)
        try:
            yield built
        finally:
            built.stop()


class Sampler(threading.Thread):
    """When the tagged ``sleep`` was last seen alive (sampled every 50 ms)."""

    def __init__(self, tag: str) -> None:
        super().__init__(daemon=True)
        self.tag = tag
        self.last_alive = 0.0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.05):
            at = time.time()
            if tagged_sleeps(self.tag):
                self.last_alive = at


def _command(sidefx: Path, tag: str) -> str:
    return (
        f"f={sidefx}; echo start $(date +%s.%N) >> $f; "
        f'if [ "$(grep -c start $f)" -gt 1 ]; then sleep 1.{tag}; else sleep {FIRST_S}.{tag}; fi; '
        "echo end $(date +%s.%N) >> $f"
    )


def _lines(path: Path) -> list[tuple[str, float]]:
    try:
        return [(w, float(t)) for w, t in (line.split() for line in path.read_text().splitlines())]
    except FileNotFoundError:
        return []


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


def _start_on_p(fleet: Fleet, session: Session, cid: str, args: dict[str, Any]) -> Any:
    """Start the call with D stopped, so P claims it; D resumes once P runs it."""
    fleet.d.signal(signal.SIGSTOP)
    try:
        holder: list[Any] = []
        thread = threading.Thread(
            target=lambda: holder.append(session.call_sync("bash", args, call_id=cid)),
            daemon=True,
        )
        thread.start()
        record = _until(
            lambda: (
                (session.record_sync(cid) or {}).get("status") == "running"
                and session.record_sync(cid)
            ),
            30,
            "the call running",
        )
        assert str(record["worker"]).endswith(f":{fleet.p.pid}"), record["worker"]
    finally:
        fleet.d.signal(signal.SIGCONT)
    return thread, holder


def _session(fleet: Fleet, tmp_path: Path, policy: str) -> tuple[Session, Path]:
    workspace = tmp_path / "ws"
    (workspace / "sidefx").mkdir(parents=True)
    config = {
        "tools": [
            {
                "id": "Main:bash",
                "on_worker_lost": policy,
                "params": {"enabled_background": True},
            },
            {"id": "Main:task_output"},
            {"id": "Main:kill_task"},
        ]
    }
    return Session.connect(fleet.redis.url, config, workspace), workspace / "sidefx"


# `fail` (the slower: it waits out the lease twice) runs in `make test-long`.
@pytest.mark.parametrize("policy", [pytest.param("fail", marks=pytest.mark.long), "rerun"])
def test_a_partitioned_worker_stops_its_command_before_the_fleet_acts(
    fleet: Fleet, tmp_path: Path, policy: str
) -> None:
    fleet.heal()
    session, sidefx = _session(fleet, tmp_path, policy)
    tag = str(int(time.time() * 1000) % 10**9)
    path = sidefx / f"part-{policy}"
    sampler = Sampler(f"{FIRST_S}.{tag}")
    sampler.start()
    try:
        thread, answer = _start_on_p(
            fleet,
            session,
            f"part-{policy}",
            {"command": _command(path, tag), "description": "t"},
        )
        _until(lambda: _lines(path) and sampler.last_alive, 30, "the first run started")
        fleet.proxy.freeze()
        frozen_at = time.time()
        thread.join(60)
        answered_at = time.time()
        assert answer, "no answer within 60 s"
        result = answer[0]
        if policy == "fail":
            assert result.is_error and result.error is not None
            assert result.error.code == "worker_lost"
            assert result.error.details["may_have_run"] is True
            # Its processes were gone before the fleet answered, and it never ended.
            time.sleep(2 * LEASE)
            assert sampler.last_alive < answered_at, (sampler.last_alive, answered_at)
            assert [w for w, _ in _lines(path)] == ["start"]
        else:
            assert not result.is_error, result.prompt_text
            assert "attempt 2 of 3" in result.prompt_text
            lines = _lines(path)
            assert [w for w, _ in lines] == ["start", "start", "end"], lines
            rerun_started = lines[1][1]
            assert sampler.last_alive < rerun_started, (sampler.last_alive, rerun_started)
        # The fence acted inside the lease, not at the command's end.
        assert sampler.last_alive - frozen_at < LEASE + 2
        assert not tagged_sleeps(f"{FIRST_S}.{tag}")
    finally:
        sampler.halt.set()
        session.close()
        fleet.heal()


def test_a_partitioned_holder_stops_its_background_command_before_its_rerun(
    fleet: Fleet, tmp_path: Path
) -> None:
    fleet.heal()
    session, sidefx = _session(fleet, tmp_path, "rerun")
    tag = str(int(time.time() * 1000) % 10**9)
    path = sidefx / "part-bg"
    sampler = Sampler(f"{FIRST_S}.{tag}")
    sampler.start()
    try:
        args = {"command": _command(path, tag), "description": "t", "is_background": True}
        fleet.d.signal(signal.SIGSTOP)  # so that P takes the start and its holder the command
        try:
            started = session.call_sync("bash", args, call_id="part-bg-start")
            assert not started.is_error, started.prompt_text
            task_id = started.output.value["task_id"]
            record = _until(
                lambda: (
                    (session.record_sync(task_id) or {}).get("status") == "running"
                    and session.record_sync(task_id)
                ),
                30,
                "the task running",
            )
        finally:
            fleet.d.signal(signal.SIGCONT)
        assert record["attempt"] == 1
        _until(lambda: _lines(path) and sampler.last_alive, 30, "the first run started")
        fleet.proxy.freeze()
        frozen_at = time.time()
        lines = _until(lambda: len(_lines(path)) >= 2 and _lines(path), 60, "the re-run started")
        _until(
            lambda: (session.record_sync(task_id) or {}).get("status") == "succeeded",
            30,
            "the re-run ended",
        )
        lines = _lines(path)
        assert [w for w, _ in lines] == ["start", "start", "end"], lines
        assert sampler.last_alive < lines[1][1], (sampler.last_alive, lines[1][1])
        assert sampler.last_alive - frozen_at < LEASE + 2
    finally:
        sampler.halt.set()
        session.close()
        fleet.heal()
