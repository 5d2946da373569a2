"""A real Flower on the test stack, started the way ``toolhub up`` starts it (same task list
columns), and the helpers the Flower tests read it with."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.distributed.helpers import wait_until
from tests.fixtures_stack import REPO, STACK_ENV, Stack, free_port
from toolhub.stack.local import FLOWER_TASKS_COLUMNS

AUTH = ("ops", "flower-test-password")
SECRET = "sk-live-0bs3rv4b1l1ty"


@pytest.fixture
def flower(live: Stack, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        **STACK_ENV,
        "TOOLHUB_REDIS_URL": live.url,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("FLOWER_UNAUTHENTICATED_API", None)
    env.pop("FLOWER_TASKS_COLUMNS", None)
    argv = [sys.executable, "-m", "celery", "--app", "workers.app:app", "flower"]
    argv += [f"--port={port}", "--address=127.0.0.1", f"--basic-auth={AUTH[0]}:{AUTH[1]}"]
    argv += [f"--tasks_columns={FLOWER_TASKS_COLUMNS}"]
    log = tmp_path / "flower.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: ok(f"{url}/healthcheck") or proc.poll() is not None, 30, 0.1)
        assert proc.poll() is None, log.read_text()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def ok(url: str) -> bool:
    try:
        return httpx.get(url, auth=AUTH, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def get(url: str, **params: Any) -> httpx.Response:
    response = httpx.get(url, auth=AUTH, params=params, timeout=10)
    response.raise_for_status()
    return response


def tasks_by_call(url: str) -> dict[str, dict[str, Any]]:
    """Flower's ``/api/tasks``, keyed by the call id each task's kwargs show."""
    tasks = get(f"{url}/api/tasks").json()
    found = {}
    for task in tasks.values():
        for call_id in call_ids(str(task.get("kwargs"))):
            found[call_id] = task
    return found


def call_ids(shown: str) -> list[str]:
    marker = "'call_id': '"
    return [part.split("'", 1)[0] for part in shown.split(marker)[1:]]


def warm_up(url: str, call: Callable[[str], object]) -> None:
    """Flower only sees events sent after its receiver is up: call (``call(call_id)``) until
    one of the calls shows (its events reach Flower a moment after its result reaches us)."""
    warm: list[str] = []

    def warmed_up() -> bool:
        warm.append(f"flower-warm-{len(warm)}")
        call(warm[-1])
        return bool(set(warm) & set(tasks_by_call(url)))

    wait_until(warmed_up, 20, 0.2)
