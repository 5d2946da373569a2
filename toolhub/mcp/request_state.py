"""``requestState`` for MCP tasks and for a plain call's questions: opaque to the client,
integrity-protected, bound to one task (or call), one principal and a short expiry.

SEP-2663 lets a server hand each task-bearing message a ``requestState`` that the client echoes
on its next ``tasks/get``/``update``/``cancel``, and says a server MUST treat an echoed value
as attacker-controlled: protect it (HMAC or AEAD) when it matters, and reject what fails. The
extension's newer draft drops the field; toolhub still sends it (clients that follow the newer
draft ignore it) and checks it whenever a client sends one back. Authorization never depends on
it: the task record's principal is checked on every request anyway.

The value is ``<payload>.<mac>``: the payload is base64url JSON ``{"t": task id, "p":
principal, "e": expiry}``, the mac HMAC-SHA256 over it. The key is the fleet key
(``TOOLHUB_FLEET_KEY``) when there is one; else, for a distributed session, a random key kept
in the session's Redis (every replica of the fleet uses the same; whoever can read Redis could
forge one, but whoever can write Redis can already run commands — docs/operations.md); else a
key of this process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis import Redis

STATE_KEY = "toolhub:mcptask-state-key"
#: How long one ``requestState`` is accepted: a client polls far more often than this.
STATE_TTL_S = 600.0


class StateRefused(ValueError):
    """An echoed ``requestState`` that is not one this fleet issued for this task and caller."""


class RequestStates:
    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def for_fleet(cls, client: Redis | None) -> RequestStates:
        from toolhub.distributed.signing import fleet_keys

        keys = fleet_keys()
        if keys is not None:
            # A key of its own, derived from the fleet key (which never leaves FleetKey).
            derived = keys.current.sign(b"toolhub:mcp-request-state\0", b"key")
            return cls(hashlib.sha256(derived.encode()).digest())
        if client is not None:
            client.set(STATE_KEY, secrets.token_hex(32), nx=True)
            shared = client.get(STATE_KEY)
            if shared is not None:
                return cls(bytes.fromhex(shared.decode() if isinstance(shared, bytes) else shared))
        return cls(os.urandom(32))

    def issue(self, task_id: str, principal: str, *, now: float | None = None) -> str:
        expiry = int((now if now is not None else time.time()) + STATE_TTL_S)
        body = json.dumps({"t": task_id, "p": principal, "e": expiry}, separators=(",", ":"))
        payload = base64.urlsafe_b64encode(body.encode()).rstrip(b"=")
        return f"{payload.decode()}.{self._mac(payload)}"

    def check(self, state: str, task_id: str, principal: str) -> None:
        """Raise ``StateRefused`` unless ``state`` was issued here for ``task_id`` to
        ``principal`` and has not expired."""
        if self.subject(state, principal) != task_id:
            raise StateRefused("requestState was issued for another task")

    def subject(self, state: str, principal: str) -> str:
        """What ``state`` was issued for (a task id, or a call's ``call:<id>``), once it is
        verified as issued here to ``principal`` and not expired; else ``StateRefused``."""
        payload, _, mac = state.partition(".")
        if not payload or not hmac.compare_digest(mac, self._mac(payload.encode())):
            raise StateRefused("requestState failed verification")
        try:
            padded = payload + "=" * (-len(payload) % 4)
            data = json.loads(base64.urlsafe_b64decode(padded))
        except ValueError:
            raise StateRefused("requestState failed verification") from None
        if not isinstance(data, dict) or not isinstance(data.get("t"), str):
            raise StateRefused("requestState failed verification")
        if data.get("p") != principal:
            raise StateRefused("requestState was issued to another caller")
        expiry = data.get("e")
        if not isinstance(expiry, int) or expiry < time.time():
            raise StateRefused("requestState has expired")
        return str(data["t"])

    def _mac(self, payload: bytes) -> str:
        digest = hmac.new(self._key, payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
