"""The host's background holder: the process that runs durable background commands
(``server.py``, ``python -m workers.holder.server``), the worker's client of it
(``client.py``), the warmer that keeps it started (``warmer.py``), where its commands run
(``places.py``, ``session_records.py``) and the host-local secrets it relies on."""
