"""The workers suite mirrors ``workers/`` (one directory per room, one file per module). Tests
that need a fleet run on the distributed suite's real stack (redis-server and two ``toolhub
worker`` processes) and its fixtures."""

from tests.distributed.conftest import connect, live, store

__all__ = ["connect", "live", "store"]
