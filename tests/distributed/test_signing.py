"""A Redis write alone cannot run a command (issue 13, item 2): with a fleet key, dispatchers
sign every queued message and session record, and workers run nothing that does not verify.

The attack, as the review made it: a forged session record (a workspace of the forger's
choosing) and a forged ``bash`` message written straight to Redis. Without a key it runs (the
trust boundary is then Redis itself); on a fleet with a key it is refused, answered, dead-
lettered and counted, and the marker file the command would create never appears. Real
redis-server, real ``toolhub worker`` processes (the shared unsigned stack, and a signed fleet
of its own), real ``bash``.

Replay (issue 36): a signed message carries its issue time, and one older than the fleet's
message age is refused (``expired``); a finished call whose record a Redis writer resets, with
its signed message pushed again, does not run again (``replayed``); a call whose worker dies
still runs to its end on another worker, from the same signed message."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.helpers import TASK_TOOLS, follow_all, wait_until, worker_pid
from tests.fixtures_stack import WorkerProcess
from tests.observability.metrics_scrape import scrape, value
from toolhub import CallResult, Progress, Session
from toolhub.distributed.celery_app import make_celery
from toolhub.distributed.codec import pack, unpack
from toolhub.distributed.enqueue import capture_send_task
from toolhub.distributed.settings import Settings
from toolhub.distributed.shared import close_shared_backends
from toolhub.distributed.signing import FleetKey, FleetKeys
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer
from toolhub.toolset import ToolSetConfig

pytestmark = pytest.mark.timeout(90)

FLEET_KEY = "fleet-key-3b9f0c5e8a7d4f21b6c0e9d8a7f6e5d4"
OTHER_KEY = "another-fleet-key-7c1d2e3f4a5b6c7d8e9f0a1b2c3d"
DEADLETTERED = "toolhub_worker_messages_deadlettered_total"
#: The signed fleet's message age (``TOOLHUB_MESSAGE_MAX_AGE_SECONDS``).
MAX_AGE = 300


@dataclass
class Fleet:
    redis: RedisServer
    worker: WorkerProcess
    store: RedisStore
    home: Path


@pytest.fixture(scope="module")
def signed() -> Iterator[Fleet]:
    """Redis and one worker that requires signatures (``TOOLHUB_REQUIRE_SIGNED=1``)."""
    home = Path(tempfile.mkdtemp(prefix="toolhub-signed-"))
    redis = RedisServer().start()
    env = {
        "TOOLHUB_FLEET_KEY": FLEET_KEY,
        "TOOLHUB_REQUIRE_SIGNED": "1",
        "TOOLHUB_MESSAGE_MAX_AGE_SECONDS": str(MAX_AGE),
    }
    worker = WorkerProcess("signed", redis.url, home, env=env, loglevel="INFO")
    store = RedisStore.from_settings(Settings.from_env(redis.url))
    try:
        worker.start()
        worker.wait_ready()
        yield Fleet(redis, worker, store, home)
    finally:
        store.close()
        worker.stop()
        redis.stop()
        shutil.rmtree(home, ignore_errors=True)


def forge(store: RedisStore, cid: str, workspace: Path, *, sig: str | None = None) -> None:
    """What someone with write access to Redis (and no key) can do: a session record naming a
    workspace of their choosing, its config, a queued call record, and the Celery message of
    a ``bash`` call, pushed onto the command queue."""
    sid = f"forged-{cid}"
    config = ToolSetConfig.model_validate(TASK_TOOLS)
    config_hash, text = config.config_hash(), config.model_dump_json()
    session = {"config": text, "config_hash": config_hash, "workspace": str(workspace)}
    store.client.hset(store.keys.session(sid), mapping=session)
    store.client.set(store.keys.config(config_hash), text)
    message: dict[str, Any] = {
        "call_id": cid,
        "run_id": "forged-run",
        "session_id": sid,
        "config_hash": config_hash,
        "name": "bash",
        "tool": "Main:bash",
        "arguments": {"command": "id -u > pwned", "description": "forged"},
        "max_attempts": 1,
    }
    if sig is not None:
        message["sig"] = sig
    fields = {"session_id": sid, "tool": "Main:bash", "name": "bash", "queue": "toolhub.command"}
    assert store.records.create(cid, "forged-run", {**fields, "message": pack(message)})
    app = make_celery(store.settings)
    try:
        captured = capture_send_task(
            app, "toolhub.execute", queue="toolhub.command", kwargs=message, kwargsrepr="f"
        )
    finally:
        app.close()
    assert captured is not None
    store.client.lpush(*captured)


def result_of(store: RedisStore, cid: str) -> CallResult:
    events = asyncio.run(asyncio.wait_for(follow_all(store, cid), 20))
    assert isinstance(events[-1].item, CallResult)
    return events[-1].item


def deadletter(store: RedisStore, cid: str) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        for line in store.client.lrange(store.keys.deadletter, 0, -1):
            entry = json.loads(line)
            if entry["call_id"] == cid:
                return entry
        return None

    return wait_until(find, 10)


def test_without_a_fleet_key_a_redis_write_runs_a_command(live, store, tmp_path: Path):
    """The attack, on the shared stack (no key): the trust boundary is Redis itself."""
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    forge(store, "forged-unsigned-fleet", chosen)
    result = result_of(store, "forged-unsigned-fleet")
    assert not result.is_error, result.prompt_text
    assert (chosen / "pwned").exists()


FORGERIES = {
    "no signature": (None, "unsigned"),
    "a made-up signature": (f"v1:{FleetKey(FLEET_KEY).kid}:{'0' * 64}", "bad_signature"),
    "signed with the forger's own key": ("own-key", "bad_signature"),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_session_and_message_never_run_on_a_signed_fleet(signed, tmp_path, forgery):
    sig, reason = FORGERIES[forgery]
    cid = f"forged-{reason}-{len(forgery)}"
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    before = value(scrape(signed.worker), DEADLETTERED, reason=reason)
    if sig == "own-key":
        own = FleetKeys(FleetKey(OTHER_KEY))
        sig = own.sign_message({"call_id": cid})["sig"]

    forge(signed.store, cid, chosen, sig=sig)

    result = result_of(signed.store, cid)
    assert result.is_error and result.error is not None
    assert result.error.code == "message_refused" and "did not run" in result.error.detail
    entry = deadletter(signed.store, cid)
    assert entry["reason"] == reason and entry["queue"] == "toolhub.command"
    assert value(scrape(signed.worker), DEADLETTERED, reason=reason) == before + 1
    time.sleep(0.3)
    assert not (chosen / "pwned").exists() and list(chosen.iterdir()) == []
    assert signed.store.get_record(cid)["attempts"] == []  # never claimed
    assert signed.worker.alive


def _connect(fleet: Fleet, ws: Path, sid: str) -> Session:
    ws.mkdir(parents=True, exist_ok=True)
    return Session.connect(fleet.redis.url, TASK_TOOLS, ws, session_id=sid)


def test_signed_calls_run(signed, tmp_path, monkeypatch):
    """A dispatcher with the fleet key: foreground commands run, and so do background ones
    (their message is signed by the worker whose ``bash`` call started them)."""
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", FLEET_KEY)
    ws = tmp_path / "ws"
    with _connect(signed, ws, "signed-ok") as session:
        assert signed.store.get_session("signed-ok")["sig"].startswith("v1:")
        result = session.call_sync(
            "bash", {"command": "echo signed > out.txt", "description": "t"}, call_id="sig-ok"
        )
        assert not result.is_error, result.prompt_text
        assert (ws / "out.txt").read_text() == "signed\n"
        started = session.call_sync(
            "bash",
            {"command": "echo bg > bg.txt", "description": "t", "is_background": True},
            call_id="sig-bg",
        )
        assert not started.is_error, started.prompt_text
        task_id = str(started.output.value["task_id"])
        record = wait_until(
            lambda: (r := signed.store.get_record(task_id)) and r["status"] == "succeeded" and r
        )
        assert record["status"] == "succeeded" and (ws / "bg.txt").read_text() == "bg\n"


def test_a_backlogged_call_runs_with_the_dispatchers_signature(
    signed, tmp_path, monkeypatch, request
):
    """A call past the sunk list's window waits as its id; the worker that promotes it builds
    its message from the record's stored copy, signed by the dispatcher (a worker signs
    nothing it reads from Redis), and the signed fleet runs every call once."""
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", FLEET_KEY)
    monkeypatch.setenv("TOOLHUB_FAIR_SHARE", "1")
    monkeypatch.setenv("TOOLHUB_FAIR_BURST", "1")
    monkeypatch.setenv("TOOLHUB_BACKLOG_WINDOW", "2")
    ws = tmp_path / "ws"
    backlog = signed.store.keys.backlog("toolhub.command")
    results: list[CallResult] = []
    close_shared_backends()  # the scripts are made with the window: this test's, then the default
    request.addfinalizer(close_shared_backends)  # after the session below has closed
    with _connect(signed, ws, "signed-backlog") as session:

        def call(i: int) -> None:
            args = {"command": f"echo {i} >> ran.txt", "description": "t"}
            results.append(session.call_sync("bash", args, call_id=f"sig-bl{i}"))

        callers = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        signed.worker.signal(signal.SIGSTOP)  # nothing drains until the backlog holds calls
        try:
            for caller in callers:
                caller.start()
            wait_until(lambda: signed.store.client.llen(backlog) >= 3, 30)
        finally:
            signed.worker.signal(signal.SIGCONT)
        for caller in callers:
            caller.join(120)
    assert len(results) == 8 and all(not r.is_error for r in results), [
        r.prompt_text for r in results if r.is_error
    ]
    assert sorted((ws / "ran.txt").read_text().split()) == [str(i) for i in range(8)]
    assert signed.store.client.llen(backlog) == 0


def test_the_stored_message_keeps_the_dispatchers_signature(signed, tmp_path, monkeypatch):
    """The copy a sweep re-enqueues (a lost worker, a hand-back) is the signed message itself:
    workers never sign what they read from Redis."""
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", FLEET_KEY)
    with _connect(signed, tmp_path / "ws", "signed-stored") as session:

        async def go() -> tuple[dict[str, Any], CallResult]:
            call = asyncio.ensure_future(
                session.call("bash", {"command": "sleep 0.5", "description": "t"}, call_id="st")
            )
            key = signed.store.keys.call("st")
            raw = await asyncio.to_thread(
                wait_until, lambda: signed.store.client.hget(key, "message")
            )
            return unpack(raw), await call

        message, result = asyncio.run(asyncio.wait_for(go(), 20))
    assert not result.is_error, result.prompt_text
    FleetKeys(FleetKey(FLEET_KEY)).verify_message("toolhub.execute", message, 600)


def test_a_call_signed_with_another_key_is_refused(signed, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", OTHER_KEY)
    ws = tmp_path / "ws"
    with _connect(signed, ws, "signed-other") as session:
        result = session.call_sync(
            "bash", {"command": "touch ran", "description": "t"}, call_id="sig-other"
        )
    assert result.is_error and result.error is not None
    assert result.error.code == "message_refused"
    assert FleetKey(OTHER_KEY).kid in result.error.detail
    assert deadletter(signed.store, "sig-other")["reason"] == "bad_signature"
    assert not (ws / "ran").exists()


def test_a_tampered_session_record_or_config_is_refused(signed, tmp_path, monkeypatch):
    """A signed session whose workspace (or stored config) is rewritten in Redis before its
    call: the worker builds nothing from it, so the call runs neither there nor anywhere."""
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", FLEET_KEY)
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    args = {"command": "touch ran", "description": "t"}
    with _connect(signed, tmp_path / "a", "tampered-workspace") as session:
        signed.store.client.hset(
            signed.store.keys.session("tampered-workspace"), "workspace", str(chosen)
        )
        moved = session.call_sync("bash", args, call_id="tampered-ws")
    with _connect(signed, tmp_path / "b", "tampered-config") as session:
        config_key = signed.store.keys.config(session.executor.config_hash)
        unconfined = {"id": "Main:bash", "params": {"sandbox": "full"}}
        loose = {"tools": [unconfined, *TASK_TOOLS["tools"][1:]]}
        signed.store.client.set(config_key, ToolSetConfig.model_validate(loose).model_dump_json())
        altered = session.call_sync("bash", args, call_id="tampered-config")
    for result, why in ((moved, "does not match"), (altered, "does not have that hash")):
        assert result.is_error and result.error is not None
        assert result.error.code == "message_refused" and why in result.error.detail
    assert not (chosen / "ran").exists()
    assert not (tmp_path / "a" / "ran").exists() and not (tmp_path / "b" / "ran").exists()
    log = signed.worker.log_path.read_text()
    assert FLEET_KEY not in log
    assert log.count(f"running only messages signed with fleet key {FleetKey(FLEET_KEY).kid}") == 1


def test_workers_say_what_they_verify_and_refuse_to_start_without_a_usable_key(tmp_path):
    redis = RedisServer().start()
    try:
        cases = {
            "required": {"TOOLHUB_FLEET_KEY": "", "TOOLHUB_REQUIRE_SIGNED": "1"},
            "short": {"TOOLHUB_FLEET_KEY": "short-secret-9f3a"},
        }
        refusing = {
            name: WorkerProcess(name, redis.url, tmp_path, env=env).start()
            for name, env in cases.items()
        }
        unsigned = WorkerProcess("unsigned", redis.url, tmp_path, env={"TOOLHUB_FLEET_KEY": ""})
        unsigned.start().wait_ready()
        unsigned.stop()
        for worker in refusing.values():
            assert worker.wait(30) == 2, worker.tail()
    finally:
        redis.stop()
    assert (
        "TOOLHUB_REQUIRE_SIGNED is set but TOOLHUB_FLEET_KEY is not"
        in refusing["required"].log_path.read_text()
    )
    short = refusing["short"].log_path.read_text()
    assert "TOOLHUB_FLEET_KEY is too short (17 characters" in short
    assert "short-secret-9f3a" not in short
    log = unsigned.log_path.read_text()
    assert log.count("are not signed (no TOOLHUB_FLEET_KEY)") == 1, log


def push(store: RedisStore, message: dict[str, Any], queue: str = "toolhub.command") -> None:
    """LPUSH the Celery message of ``message`` onto ``queue``, as kombu would have built it."""
    app = make_celery(store.settings)
    try:
        captured = capture_send_task(
            app, "toolhub.execute", queue=queue, kwargs=message, kwargsrepr="r"
        )
    finally:
        app.close()
    assert captured is not None
    store.client.lpush(*captured)


def crafted(session: Session, cid: str, command: str, **extra: Any) -> dict[str, Any]:
    """A ``bash`` message of ``session`` as its dispatcher builds it, before it is signed."""
    executor = session.executor
    return {
        "call_id": cid,
        "run_id": f"run-{cid}",
        "session_id": session.session_id,
        "config_hash": executor.config_hash,
        "name": "bash",
        "tool": "Main:bash",
        "arguments": {"command": command, "description": "t"},
        "max_attempts": 1,
        **extra,
    }


AGES = {
    "issued an hour ago": -3600,
    "issued an hour ahead": 3600,
    "undated (an older dispatcher)": None,
}


@pytest.mark.parametrize("age", sorted(AGES))
def test_an_expired_signed_message_is_refused_and_a_fresh_one_runs(
    signed, tmp_path, monkeypatch, age
):
    """A genuine signed message captured long ago (or dated by a clock far off, or by a
    dispatcher that dates nothing) is refused before anything is claimed; the same message
    dated now runs."""
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", FLEET_KEY)
    keys = FleetKeys(FleetKey(FLEET_KEY))
    ws = tmp_path / "ws"
    offset = AGES[age]
    with _connect(signed, ws, f"expiry-{len(age)}") as session:
        cid = f"expired-{len(age)}"
        stamp = {} if offset is None else {"iat": int(time.time()) + offset}
        message = keys.sign_message(crafted(session, cid, "touch expired", **stamp))
        fields = {"session_id": session.session_id, "tool": "Main:bash", "name": "bash"}
        assert signed.store.records.create(cid, message["run_id"], fields)
        push(signed.store, message)
        result = result_of(signed.store, cid)
        assert result.is_error and result.error is not None
        assert result.error.code == "message_refused", result.prompt_text
        why = "no issue time" if offset is None else "beyond the fleet's 300 s"
        assert why in result.error.detail and "did not run" in result.error.detail
        assert deadletter(signed.store, cid)["reason"] == "expired"
        assert signed.store.get_record(cid)["attempts"] == []

        fresh = f"fresh-{len(age)}"
        dated = {"iat": int(time.time())}
        message = keys.sign_message(crafted(session, fresh, "touch fresh", **dated))
        assert signed.store.records.create(fresh, message["run_id"], fields)
        push(signed.store, message)
        ran = result_of(signed.store, fresh)
        assert not ran.is_error, ran.prompt_text
    assert (ws / "fresh").exists() and not (ws / "expired").exists()
    log = signed.worker.log_path.read_text()
    assert "(expired: the message " in log and f"call {cid!r} answered" in log


def capture_and_run(fleet: Fleet, session: Session, cid: str, command: str) -> dict[str, Any]:
    """Run a ``bash`` call of ``session`` to its end; returns its signed message, read from
    its record while it ran (what a writer of Redis sees)."""

    async def go() -> tuple[dict[str, Any], CallResult]:
        args = {"command": command, "description": "t"}
        call = asyncio.ensure_future(session.call("bash", args, call_id=cid))
        key = fleet.store.keys.call(cid)
        raw = await asyncio.to_thread(wait_until, lambda: fleet.store.client.hget(key, "message"))
        return unpack(raw), await call

    message, result = asyncio.run(asyncio.wait_for(go(), 30))
    assert not result.is_error, result.prompt_text
    return message


def reset(store: RedisStore, cid: str, message: dict[str, Any], status: str) -> None:
    """What a writer of Redis with no fleet key does to replay a finished call: its record
    (and events) rewritten as a fresh dispatch's, ``queued``, or ``running`` with a lapsed
    lease that the recovery sweep re-enqueues from the stored (signed) message."""
    key = store.keys.call(cid)
    store.client.delete(key, store.keys.events(cid))
    record = {
        "status": status,
        "run_id": message["run_id"],
        "session_id": message["session_id"],
        "tool": message["tool"],
        "name": message["name"],
        "queue": "toolhub.command",
        "max_attempts": 3,
        "seq": 0,
        "attempt": 0 if status == "queued" else 1,
        "lost": 0,
        "message": pack(message),
    }
    if status == "running":
        record["lease_until"] = "0"
    store.client.hset(key, mapping=record)
    if status == "running":
        store.client.zadd(store.keys.leases, {cid: 0})
    else:
        push(store, message)


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_finished_call_reset_by_a_redis_writer_does_not_run_again(
    signed, tmp_path, monkeypatch, status
):
    monkeypatch.setenv("TOOLHUB_FLEET_KEY", FLEET_KEY)
    ws = tmp_path / "ws"
    cid = f"replayed-{status}"
    before = value(scrape(signed.worker), DEADLETTERED, reason="replayed")
    with _connect(signed, ws, f"replay-{status}") as session:
        message = capture_and_run(signed, session, cid, "echo ran >> runs.txt; sleep 1")
        assert (ws / "runs.txt").read_text() == "ran\n"
        original = signed.store.get_record(cid)
        assert original["status"] == "succeeded"
        # The run's marker, kept while its message may run (the worker's age + 5 min).
        marker = f"{signed.store.keys.call(cid)}:done:{message['run_id']}"
        assert signed.store.client.get(marker) == b"1"
        assert 0 < signed.store.client.ttl(marker) <= MAX_AGE + 300

        reset(signed.store, cid, message, status)

        # The follower of the reset call gets a typed answer, not a second run.
        result = result_of(signed.store, cid)
        assert result.is_error and result.error is not None
        assert result.error.code == "message_refused", result.prompt_text
        assert "already finished" in result.error.detail
        assert deadletter(signed.store, cid)["reason"] == "replayed"
        assert value(scrape(signed.worker), DEADLETTERED, reason="replayed") == before + 1
        time.sleep(1.5)  # a second run would have appended by now
        assert (ws / "runs.txt").read_text() == "ran\n"
        assert signed.store.client.zscore(signed.store.keys.leases, cid) is None

        # The session and the fleet go on: the same call id, dispatched anew, runs.
        again = session.call_sync(
            "bash", {"command": "echo again >> runs.txt", "description": "t"}, call_id=cid
        )
        assert not again.is_error, again.prompt_text
    assert (ws / "runs.txt").read_text() == "ran\nagain\n"
    log = signed.worker.log_path.read_text()
    assert "(replayed: run " in log and f"call {cid!r} answered" in log
    assert signed.worker.alive


def test_a_signed_call_whose_worker_dies_still_runs_to_its_end(tmp_path, monkeypatch):
    """The same signed message, redelivered after its worker was killed mid-call (the sweep
    re-enqueues the stored copy), is neither expired nor a replay: it runs as attempt 2 on
    the other worker, once, to its end."""
    from tests.distributed.plugin_tools import CONFIG, make_builder
    from tests.fixtures_stack import Stack

    monkeypatch.setenv("TOOLHUB_FLEET_KEY", FLEET_KEY)
    stack = Stack(workers=2, env={"TOOLHUB_FLEET_KEY": FLEET_KEY, "TOOLHUB_REQUIRE_SIGNED": "1"})
    stack.start()
    marker = tmp_path / "runs.txt"
    ws = tmp_path / "ws"
    ws.mkdir()
    try:
        store = RedisStore.from_settings(Settings.from_env(stack.url))
        session = Session.connect(stack.url, CONFIG, ws, builder=make_builder())
        try:

            async def go() -> Progress | CallResult:
                seen: list[Progress | CallResult] = []
                async for item in session.stream(
                    "ticks", {"n": 20, "delay_ms": 60, "marker": str(marker)}, call_id="k"
                ):
                    seen.append(item)
                    if len(seen) == 5:
                        pid = worker_pid(store.get_record("k"))
                        stack.worker_by_pid(pid).signal(signal.SIGKILL)
                return seen[-1]

            result = asyncio.run(asyncio.wait_for(go(), 90))
        finally:
            session.close()
        assert isinstance(result, CallResult) and not result.is_error, result.prompt_text
        record = store.get_record("k")
        assert record["status"] == "succeeded" and record["attempt"] == 2
        assert [a["outcome"] for a in record["attempts"]] == ["worker_lost", "succeeded"]
        lines = marker.read_text().splitlines()
        assert len([line for line in lines if line.startswith("done")]) == 1
        assert store.client.llen(store.keys.deadletter) == 0
        store.close()
    finally:
        stack.stop()
