"""``boot`` is the one place a worker's patches and hookups are installed: importing any other
module of ``workers`` patches nothing and hooks nothing, importing ``workers.app`` (what Flower
and ``celery inspect`` do too) installs all of it, and a real worker booted by it runs its
services and stops them when it exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.distributed.helpers import wait_until
from tests.fixtures_stack import REPO, WorkerProcess
from toolhub.stack import RedisServer

STATE = """
import importlib, json, pkgutil, sys
import workers
from celery import signals
from kombu.transport import redis as transport
before = {
    "brpop": transport.Channel._brpop_read.__qualname__,
    "connparams": getattr(transport.Channel._connparams, "_toolhub_fence", False),
}
for info in pkgutil.walk_packages(workers.__path__, "workers."):
    if info.name not in {"workers.app", "workers.lifecycle.boot"} | set(sys.argv[1:]):
        importlib.import_module(info.name)
hooked = {
    name: len(getattr(signals, name).receivers)
    for name in ("worker_init", "worker_ready", "worker_shutting_down", "worker_shutdown")
}
after_modules = {
    "brpop": transport.Channel._brpop_read.__qualname__,
    "connparams": getattr(transport.Channel._connparams, "_toolhub_fence", False),
}
import workers.app as app
booted = {
    "brpop": transport.Channel._brpop_read.__qualname__,
    "connparams": getattr(transport.Channel._connparams, "_toolhub_fence", False),
    "steps": sorted(step.name for step in app.app.steps["worker"]),
    "tasks": sorted(name for name in app.app.tasks if name.startswith("toolhub.")),
    "ready": len(signals.worker_ready.receivers),
    "shutdown": len(signals.worker_shutdown.receivers),
}
print(json.dumps({"before": before, "modules": after_modules, "hooked": hooked, "booted": booted}))
"""


def test_only_boot_installs_anything() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", STATE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state["modules"] == state["before"], "importing a worker module patched kombu"
    assert state["hooked"] == {
        "worker_init": 0,
        "worker_ready": 0,
        "worker_shutting_down": 0,
        "worker_shutdown": 0,
    }
    booted = state["booted"]
    assert booted["brpop"] == "_screened_brpop_read"
    assert booted["connparams"] is True
    assert booted["steps"] == ["workers.lifecycle.boot.WorkerServices"]
    assert booted["tasks"] == ["toolhub.background", "toolhub.execute", "toolhub.mcp_tools"]
    assert booted["ready"] == 1 and booted["shutdown"] == 1


def _metrics_answer(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return b"toolhub_worker_calls_in_flight" in response.read()
    except OSError:
        return False


def test_a_booted_worker_runs_its_services_and_stops_them(tmp_path: Path) -> None:
    """A real ``toolhub worker``: ready (heartbeat, metrics), then SIGTERM: heartbeat
    ``stopping``, the metrics listener closed, exit 0."""
    redis = RedisServer().start()
    worker = WorkerProcess("booted", redis.url, tmp_path, concurrency=1, loglevel="DEBUG")
    try:
        worker.start().wait_ready(120)
        assert wait_until(lambda: _metrics_answer(worker.metrics_url), 60)
        worker.signal(signal.SIGTERM)
        assert worker.wait(120) == 0
        assert worker.heartbeat.read_text() == "stopping"
        assert not _metrics_answer(worker.metrics_url)
        log = worker.log_path.read_text()
        started = [
            log.index(f"starting {name}") for name in ("toolhub-heartbeat", "toolhub-leases")
        ]
        stopped = [
            log.index(f"stopping {name}") for name in ("toolhub-leases", "toolhub-heartbeat")
        ]
        assert started == sorted(started) and stopped == sorted(stopped)
        assert "stopping toolhub-hand-back" in log
    finally:
        worker.signal(signal.SIGKILL)
        redis.stop()
