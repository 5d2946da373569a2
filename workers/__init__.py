"""toolhub's Celery workers. Start one with ``toolhub worker``; the Celery app is
``workers.app:app``. Four rooms:

* ``calls``: handling one call, from the Celery task to its published end (claim, run, refusals,
  outcomes, the tool-set cache, sub-agents, stdio MCP tools);
* ``lifecycle``: the worker process from boot to exit (the boot function and bootstep, the
  services it runs beside its calls: heartbeat, leases and sweep, control, metrics);
* ``holder``: the host's background holder, which runs durable background commands, and the
  worker's side of it;
* ``guards``: what keeps a worker up and confined (the queue screen, the kombu reconnect
  guard, the command sandbox check).
"""
