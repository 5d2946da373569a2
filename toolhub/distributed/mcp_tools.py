"""The tool lists of a session's stdio MCP servers, crossing from the worker that runs them to
the dispatcher that shows them.

A fleet's dispatcher (``Session.connect``, so a gateway on Redis) starts no stdio MCP server: it
would run on the dispatcher's host, beside the gateway's secrets. Workers start them, inside the
session's sandbox, and the dispatcher learns their tools from a worker:

1. the dispatcher stores the session, deletes any earlier list of it (``Keys.mcp_tools``), and
   queues a signed ``toolhub.mcp_tools`` message (``request``) naming the session and config;
2. a worker takes it, builds the session's tool set (which starts the servers), and writes the
   list (``publish``): per server its tools (``name``, ``description``, ``input_schema``) or
   why it is not connected, or why the whole tool set was refused; it writes it again when a
   server's tool list changes;
3. the dispatcher waits for that list (``wait_for``, bounded) and registers each tool; its
   calls run on workers, each building its own instance of the server.

Threat: a tool's name routes calls and its description is text a model reads. A writer of Redis
without the fleet key must not put either before a model: with a fleet key the list is signed
(over session id, config hash and list), and a dispatcher takes no list that does not verify
(it is logged and the wait goes on). Deleting the list or never answering
only makes the session's creation fail (``ToolsUnpublished``), which a writer of Redis could
cause anyway.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from redis import Redis

from .keys import Keys
from .signing import FleetKeys, SignatureRefused, sign_mcp_tools, sign_message

logger = logging.getLogger("toolhub.distributed.mcp_tools")

#: How long a dispatcher waits for a worker's list: a queue wait, the tool set's build and each
#: server's first connection attempt (``toolhub.sources.mcp_link.CONNECT_TIMEOUT_S``) fit in it.
WAIT_S = 60.0
_POLL_S = 0.1


class ToolsUnpublished(RuntimeError):
    """No worker published the session's stdio MCP tools in time."""


@dataclass(frozen=True, slots=True)
class PublishedTools:
    """What a worker published: per server its tools, or why it is not connected; or why it
    built nothing at all (``refused``)."""

    tools: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    refused: str | None = None

    def body(self) -> str:
        data = {"tools": self.tools, "errors": self.errors, "refused": self.refused}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_body(cls, body: str) -> PublishedTools:
        """``ValueError`` for anything that is not a list as ``body`` writes it."""
        data = json.loads(body)
        tools, errors, refused = data.get("tools"), data.get("errors"), data.get("refused")
        if not (
            isinstance(tools, dict)
            and all(isinstance(v, list) and all(_is_tool(t) for t in v) for v in tools.values())
            and isinstance(errors, dict)
            and all(isinstance(v, str) for v in errors.values())
            and (refused is None or isinstance(refused, str))
        ):
            raise ValueError("not a published MCP tool list")
        return cls(tools, errors, refused)


def _is_tool(tool: Any) -> bool:
    return (
        isinstance(tool, dict)
        and isinstance(tool.get("name"), str)
        and isinstance(tool.get("description"), str)
        and isinstance(tool.get("input_schema"), dict)
    )


def publish(
    client: Redis, keys: Keys, sid: str, config_hash: str, published: PublishedTools, ttl: int
) -> None:
    """Write the list, signed when this process has a fleet key, for ``ttl`` seconds."""
    body = published.body()
    key = keys.mcp_tools(sid, config_hash)
    pipe = client.pipeline()
    pipe.hset(key, mapping={"body": body, "sig": sign_mcp_tools(sid, config_hash, body)})
    pipe.expire(key, ttl)
    pipe.execute()


def request(sid: str, config_hash: str) -> dict[str, Any]:
    """The ``toolhub.mcp_tools`` message asking a worker to publish the list (signed)."""
    from .celery_app import MCP_TOOLS_TASK

    return sign_message({"task": MCP_TOOLS_TASK, "session_id": sid, "config_hash": config_hash})


def read(
    client: Redis, keys: Keys, fleet: FleetKeys | None, sid: str, config_hash: str
) -> tuple[PublishedTools | None, str | None]:
    """The list when one is written and (with a fleet key) signed, else None; and why a list
    that is written was refused (forged, or malformed), else None."""
    raw: dict[Any, Any] = client.hgetall(keys.mcp_tools(sid, config_hash))
    found = {_text(k): _text(v) for k, v in raw.items()}
    body = found.get("body")
    if body is None:
        return None, None
    try:
        if fleet is not None:
            fleet.verify_mcp_tools(sid, config_hash, body, found.get("sig"))
        return PublishedTools.from_body(body), None
    except SignatureRefused as refused:
        return None, refused.why
    except ValueError:
        return None, "malformed"


def wait_for(
    client: Redis,
    keys: Keys,
    fleet: FleetKeys | None,
    sid: str,
    config_hash: str,
    timeout: float = WAIT_S,
) -> PublishedTools:
    """The list a worker publishes after ``request``; ``ToolsUnpublished`` after ``timeout``.
    A list that does not verify is logged (once) and waited past: the worker's overwrites it."""
    deadline = time.monotonic() + timeout
    logged: set[str] = set()
    while True:
        found, refused = read(client, keys, fleet, sid, config_hash)
        if found is not None:
            return found
        if refused is not None and refused not in logged:
            logged.add(refused)
            logger.warning("session %s: MCP tool list refused: %s", sid, refused)
        if time.monotonic() >= deadline:
            raise ToolsUnpublished(f"no worker published them within {timeout:g} s")
        time.sleep(_POLL_S)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
