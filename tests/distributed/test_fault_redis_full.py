"""A full Redis is not a lost host: background commands running while Redis is at its
``maxmemory`` (noeviction) keep running, keep their one attempt and are never re-run or
labelled "restarted after its host was lost".

Real parts: a redis-server, one worker with its holder (lease 3 s), a background command
that appends 1..N to its side-effect file and prints it, one number a second. Once it runs,
Redis is filled to a ``maxmemory`` just below what it holds for four leases, hovering there (a
write gets through now and then, as under load), then the filler is deleted. Its output writes
are refused for longer than the worker's outage window (4 s here): a full Redis is not an
outage. The script-level facts the fix rests on (Redis 6.2: a renewal lands under OOM, a plain
write does not) are in tests/distributed/test_lease_oom.py.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.helpers import one_worker_fleet
from tests.distributed.redis_fill import Full
from tests.fixtures_stack import WorkerProcess
from toolhub import Session
from toolhub.stack import RedisServer

LEASE = 3.0
N = 14
FULL_S = 4 * LEASE


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[RedisServer, WorkerProcess]]:
    home = Path(tempfile.mkdtemp(prefix="toolhub-redis-full-"))
    redis = RedisServer(data_dir=home / "redis")
    # Writes ride out a 4 s outage: a full Redis, refusing them for longer, is not one.
    outage = {"TOOLHUB_FOLLOW_OUTAGE_SECONDS": "4"}
    with one_worker_fleet(redis, home, LEASE, concurrency=2, env=outage) as fleet:
        yield fleet


CONFIG = {
    "tools": [
        {"id": "Main:bash", "params": {"enabled_background": True}},
        {"id": "Main:task_output"},
        {"id": "Main:kill_task"},
    ]
}


def test_background_commands_run_on_once_through_a_full_redis(fleet, tmp_path: Path) -> None:
    redis, worker = fleet
    workspace = tmp_path / "ws"
    (workspace / "sidefx").mkdir(parents=True)
    sidefx = workspace / "sidefx" / "count"
    command = f"for i in $(seq 1 {N}); do echo $i; echo $i >> {sidefx}; sleep 1; done"
    with Session.connect(redis.url, CONFIG, workspace) as session:
        started = session.call_sync(
            "bash", {"command": command, "description": "t", "is_background": True}
        )
        assert not started.is_error, started.prompt_text
        task_id = started.output.value["task_id"]
        deadline = time.monotonic() + 30
        while not sidefx.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        with Full(redis.url):
            time.sleep(FULL_S)
        deadline = time.monotonic() + 60
        record: dict = {}
        while time.monotonic() < deadline:
            record = session.record_sync(task_id) or {}
            if record.get("status") not in ("queued", "running"):
                break
            time.sleep(0.2)
        shown = session.call_sync("task_output", {"task_ids": [task_id]})
    assert sidefx.read_text().split() == [str(i) for i in range(1, N + 1)], "ran more than once"
    assert record.get("status") == "succeeded", record
    assert len(record["attempts"]) == 1 and record.get("lost") == 0, record["attempts"]
    assert "host was lost" not in shown.prompt_text, shown.prompt_text
    log = worker.log_path.read_text()
    assert log.count("Redis is full") == 1, worker.tail()
