"""What keeps a worker up and its commands confined: the queue screen (``poison.py``), the
kombu reconnect guard (``kombu_redis.py``) and the command sandbox check (``sandboxing.py``)."""
