"""The raw-Celery baseline of ``bench_distributed.py``: a no-op task with a Redis result
backend, on the same broker and the same pool settings as toolhub's workers (threads pool,
msgpack, late acks, prefetch 1), so the comparison isolates what toolhub adds or saves.
``BENCH_EVENTS=1`` turns on the task events Flower needs (toolhub always sends them); the bench
runs that variant's workers on the ``baseline-events`` queue, beside the plain ones."""

from __future__ import annotations

import os
import subprocess

from celery import Celery

app = Celery(
    "baseline", broker=os.environ["BENCH_REDIS_URL"], backend=os.environ["BENCH_REDIS_URL"]
)
app.conf.update(
    task_serializer="msgpack",
    result_serializer="msgpack",
    accept_content=["msgpack"],
    result_accept_content=["msgpack"],
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_default_queue="baseline",
    worker_hijack_root_logger=False,
    worker_send_task_events=os.environ.get("BENCH_EVENTS") == "1",
    task_send_sent_event=os.environ.get("BENCH_EVENTS") == "1",
)


@app.task(name="baseline.noop")
def noop() -> None:
    return None


@app.task(name="baseline.bash_true")
def bash_true() -> None:
    """``bash -c true``, unsandboxed: the raw-Celery side of a command call (bench_cpu_per_call)."""
    subprocess.run(["bash", "-c", "true"], check=False)
