"""``toolhub worker`` with a Redis URL it cannot use stops at once, exit 1, with a one-line
reason (a restart-on-failure supervisor must not read it as a clean stop); a Redis that does
not answer yet is not such a reason (the worker keeps trying). A real redis-server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhub.cli.worker import unusable_redis
from toolhub.ports import free_port
from toolhub.stack import RedisServer

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    """A redis-server's URL without its database."""
    server = RedisServer().start()
    yield server.url.rsplit("/", 1)[0]
    server.stop()


def test_a_usable_url_has_no_reason(base: str) -> None:
    assert unusable_redis(f"{base}/0") is None


@pytest.mark.parametrize(
    ("path", "says"),
    [("/99", "DB index is out of range"), ("/abc", "must be a number, not 'abc'")],
)
def test_a_database_redis_cannot_give_is_a_reason(base: str, path: str, says: str) -> None:
    reason = unusable_redis(base + path)
    assert reason is not None and says in reason


def test_a_url_of_another_scheme_is_a_reason() -> None:
    reason = unusable_redis("foo://bar")
    assert reason is not None and "redis://" in reason


def test_a_redis_that_does_not_answer_yet_is_no_reason() -> None:
    assert unusable_redis(f"redis://127.0.0.1:{free_port()}/0") is None


@pytest.mark.timeout(60)
def test_the_worker_exits_non_zero_with_one_line(base: str, tmp_path: Path) -> None:
    url = base.replace("redis://", "redis://:hunter2@") + "/99"
    done = subprocess.run(
        [TOOLHUB, "worker", "--redis", url],
        env={**os.environ, "TOOLHUB_HOME": str(tmp_path), "COLUMNS": "40"},
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"error: cannot use the Redis URL {base.replace('redis://', 'redis://:***@')}/99: "
        "Redis refused it: DB index is out of range"
    ], done.stderr
    assert "hunter2" not in done.stderr + done.stdout
