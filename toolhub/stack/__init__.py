"""Pieces of the local distributed stack that need no Docker: a Redis server process today
(``toolhub up`` composes it with workers, gateway and Flower)."""

from toolhub.ports import free_port

from .redis_server import RedisServer, find_redis_server

__all__ = ["RedisServer", "find_redis_server", "free_port"]
