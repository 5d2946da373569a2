"""JSON logs: every line one object, and every line logged while a call is handled names it.

In-process checks of the filter and formatter (threads and asyncio tasks keep their own call),
then a real ``toolhub worker`` with ``TOOLHUB_LOG_FORMAT=json`` on a Redis of its own, whose
metrics port is taken: it logs that as JSON and serves calls anyway.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.plugin_tools import CONFIG, make_builder
from tests.fixtures_stack import STACK_ENV, WorkerProcess
from toolhub import Session
from toolhub.logs import CallContextFilter, JsonFormatter, adopt_handlers, call_context
from toolhub.stack import RedisServer


def _capture(json_mode: bool) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(CallContextFilter())
    if json_mode:
        handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(f"tests.observability.{json_mode}.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger, stream


def test_json_lines_carry_the_call_of_the_thread_or_task_that_logs():
    logger, stream = _capture(json_mode=True)
    logger.info("outside")

    def worker_thread(cid: str) -> None:
        with call_context(cid, "s1", "Test:noop"):
            logger.info("in %s", cid)

    threads = [threading.Thread(target=worker_thread, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    async def tasks() -> None:
        async def one(cid: str) -> None:
            with call_context(cid, "s2", "Test:ticks"):
                await asyncio.sleep(0)
                child = asyncio.create_task(asyncio.sleep(0, result=None))
                await child
                logger.warning("in %s", cid)

        await asyncio.gather(*(one(f"a{i}") for i in range(4)))

    asyncio.run(tasks())
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")

    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["message"] == "outside" and "call_id" not in lines[0]
    assert set(lines[0]) == {"ts", "level", "logger", "message"}
    inside = [line for line in lines if line["message"].startswith("in ")]
    assert len(inside) == 8
    for line in inside:
        assert line["message"] == f"in {line['call_id']}"
        assert line["session_id"] == ("s1" if line["call_id"].startswith("t") else "s2")
    assert lines[-1]["level"] == "ERROR" and "ValueError: boom" in lines[-1]["exc_info"]


def test_text_stays_the_default(monkeypatch):
    monkeypatch.delenv("TOOLHUB_LOG_FORMAT", raising=False)
    logger, stream = _capture(json_mode=False)
    adopt_handlers(logger)
    with call_context("c1"):
        logger.info("plain")
    assert stream.getvalue() == "plain\n"


@pytest.fixture
def json_worker() -> Iterator[tuple[RedisServer, WorkerProcess, socket.socket]]:
    home = Path(tempfile.mkdtemp(prefix="toolhub-obs-"))
    redis = RedisServer(data_dir=home / "redis")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    worker = WorkerProcess(
        "json",
        redis.url,
        home,
        env={"TOOLHUB_LOG_FORMAT": "json"},
        loglevel="INFO",
    )
    worker.metrics_port = taken.getsockname()[1]
    try:
        redis.start()
        worker.start().wait_ready()
        yield redis, worker, taken
    finally:
        worker.stop()
        redis.stop()
        taken.close()
        shutil.rmtree(home, ignore_errors=True)


def test_worker_logs_are_json_with_the_call_id(json_worker, tmp_path, monkeypatch):
    redis, worker, taken = json_worker
    for key, value in STACK_ENV.items():
        monkeypatch.setenv(key, value)
    session = Session.connect(redis.url, CONFIG, tmp_path, builder=make_builder())
    try:
        result = asyncio.run(asyncio.wait_for(session.call("noop", {}, call_id="json-1"), 20))
    finally:
        session.close()
    assert not result.is_error, result.prompt_text
    worker.stop()

    raw = worker.log_path.read_text().splitlines()
    lines = [json.loads(line) for line in raw if line.strip()]
    assert len(lines) >= 3
    for line in lines:
        assert {"ts", "level", "logger", "message"} <= set(line)
    port = taken.getsockname()[1]
    assert any(
        line["logger"] == "toolhub.worker.metrics"
        and line["level"] == "WARNING"
        and f":{port} not started" in line["message"]
        for line in lines
    )
    built = [line for line in lines if line["message"].startswith("built tool set")]
    assert built and built[0]["call_id"] == "json-1"
    assert built[0]["session_id"] == session.session_id and built[0]["tool"] == "Test:noop"
    # Celery's own lines outside any call carry no call fields.
    assert any("call_id" not in line for line in lines)
