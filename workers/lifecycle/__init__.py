"""A worker process from boot to exit: ``boot.py`` installs what the app needs, ``process.py``
says what happens at each moment of the worker's life, and ``services.py`` starts and stops
every background thread (heartbeat, leases and sweep, control, metrics).

Kept import-light: ``python -m workers.lifecycle.healthcheck`` runs through this package and
must import neither Celery nor toolhub."""
