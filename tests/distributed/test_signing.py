"""A Redis write alone cannot run a command (issue 13, item 2): with a fleet key, dispatchers
sign every queued message and session record, and workers run nothing that does not verify.

The attack, as the review made it: a forged session record (a workspace of the forger's
choosing) and a forged ``bash`` message written straight to Redis. Without a key it runs (the
trust boundary is then Redis itself); on a fleet with a key it is refused, answered, dead-
lettered and counted, and the marker file the command would create never appears. Real
redis-server, real ``toolhub worker`` processes (the shared unsigned stack, and a signed fleet
of its own), real ``bash``."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.helpers import TASK_TOOLS, follow_all, wait_until
from tests.fixtures_stack import WorkerProcess
from tests.observability.metrics_scrape import scrape, value
from toolhub import CallResult, Session
from toolhub.distributed.celery_app import make_celery
from toolhub.distributed.codec import pack, unpack
from toolhub.distributed.enqueue import capture_send_task
from toolhub.distributed.settings import Settings
from toolhub.distributed.signing import FleetKey, FleetKeys
from toolhub.distributed.store import RedisStore
from toolhub.stack import RedisServer
from toolhub.toolset import ToolSetConfig

pytestmark = pytest.mark.timeout(90)

FLEET_KEY = "fleet-key-3b9f0c5e8a7d4f21b6c0e9d8a7f6e5d4"
OTHER_KEY = "another-fleet-key-7c1d2e3f4a5b6c7d8e9f0a1b2c3d"
DEADLETTERED = "toolhub_worker_messages_deadlettered_total"


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
    env = {"TOOLHUB_FLEET_KEY": FLEET_KEY, "TOOLHUB_REQUIRE_SIGNED": "1"}
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
