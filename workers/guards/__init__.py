"""What keeps a worker up and its commands confined: the queue screen (``poison.py``) and the
command sandbox check (``sandboxing.py``). The kombu reconnect guard is a reach into kombu's
internals, so it lives with the other fenced reaches (``toolhub/fences/kombu.py``)."""
