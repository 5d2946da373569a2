"""Errors a host (the program using toolhub) catches: what went wrong outside a tool call.

A tool call never raises: its failures are ``CallResult`` errors the model reads. What does
raise is setting a session up or reading the store, and those errors share one base,
``ToolhubError``, with a stable ``code`` a host can branch on.
"""

from __future__ import annotations


class ToolhubError(Exception):
    """Base of the errors toolhub raises to its host; ``code`` names the failure."""

    code = "toolhub_error"


class RedisUnavailable(ToolhubError, ConnectionError):
    """The Redis server behind a distributed session cannot be reached."""

    code = "redis_unavailable"

    def __init__(self, url: str, cause: BaseException | str) -> None:
        super().__init__(f"cannot reach Redis at {redact_url(url)}: {cause}")
        self.url = redact_url(url)


def redact_url(url: str) -> str:
    """The URL without its password, fit for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + ':' if user else ':'}***@{host}"
