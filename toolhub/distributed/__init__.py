"""The distributed stack's Redis side: settings, key names, the call protocol (records, Lua
scripts, codec, recovery sweeps), the store that follows calls, and the process's one pub/sub
router. The Redis backends of background tasks, answers and state sit beside their local twins
(``toolhub.tasks.redis``, ``toolhub.answers.redis``, ``toolhub.state.redis``)."""

from .settings import QUEUES, Settings, queue_for

__all__ = ["QUEUES", "Settings", "queue_for"]
