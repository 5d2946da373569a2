"""Handling one call on a worker: the Celery tasks (``celery_tasks.py``), their bodies
(``execute.py``, ``background.py``, ``subagent.py``), the claim and its attempt
(``claimed.py``), its events (``emitter.py``), what Flower is told (``outcomes.py``), the
messages refused (``refusals.py``), and what every call of the process shares
(``runtime.py``, ``toolsets.py``)."""
