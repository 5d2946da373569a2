"""The observability suite runs on the distributed suite's real stack (redis-server and two
``toolhub worker`` processes, each with its own metrics port) and its fixtures."""

from tests.distributed.conftest import connect, live, store
from tests.observability.flower_support import flower

__all__ = ["connect", "flower", "live", "store"]
