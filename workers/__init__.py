"""toolhub's Celery workers: the app (``workers.app:app``), the execute and background tasks,
the control listener, leases and heartbeats. Start one with ``toolhub worker``."""
