"""Redis-backed pieces of the distributed stack: settings, key names, the call protocol
(records, scripts, codec), the pub/sub hub, compare-and-set session state, and the Redis
implementations of ``BackgroundTasks`` and ``AnswerBox``."""

from .resources import install_distributed_resources
from .settings import QUEUES, Settings, queue_for

__all__ = ["QUEUES", "Settings", "install_distributed_resources", "queue_for"]
