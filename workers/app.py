"""The Celery app of toolhub workers: ``celery -A workers.app:app worker`` or ``toolhub worker``.

Configuration comes from ``toolhub.distributed.celery_app`` (msgpack only, late acks, reject on
worker lost, prefetch 1, visibility timeout above the longest run, soft shutdown, task events)
with every tunable read from ``TOOLHUB_*`` variables. Task events are published in batches
(``workers/lifecycle/consumer.py``). ``boot`` (``workers/lifecycle/boot.py``) is the one place
that installs what a worker needs into this process: the kombu guards, the tasks, the worker's
bootstep and its signal hookups; ``workers/lifecycle/process.py`` says what happens at each
moment of the worker's life.
"""

from __future__ import annotations

from toolhub.distributed.celery_app import make_celery
from toolhub.distributed.settings import Settings
from workers.lifecycle.boot import boot

settings = Settings.from_env()
app = make_celery(settings, main="workers", events="workers.lifecycle.consumer:WorkerEvents")
app.conf.worker_consumer = "workers.lifecycle.consumer:Consumer"
process = boot(app, settings)
