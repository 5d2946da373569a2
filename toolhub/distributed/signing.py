"""Signatures on what dispatchers write for workers: queued call messages and session records.

Why: a worker runs what a message names, in the workspace its session record names. With
write access to Redis alone, a forged session record and message ran ``bash`` on a worker in
a workspace of the forger's choosing (issue 13). With a fleet key (``TOOLHUB_FLEET_KEY``, the
same secret on every dispatcher and worker, never logged) dispatchers sign both, and workers
run nothing whose signatures do not verify: a Redis write alone no longer runs a command,
only a holder of the key can. Without a key, Redis itself is the trust boundary, and workers
say so once at startup (``TOOLHUB_REQUIRE_SIGNED=1`` makes them refuse to start instead).

Format: ``v1:<kid>:<hex HMAC-SHA256>``, compared in constant time. The MAC covers a domain tag
(message or session, so one can never pass for the other) and msgpack bytes:

* a message: the message without its ``sig`` field, as the dispatcher packed it. msgpack
  encodes a decoded map back to the same bytes, so a worker recomputes them from exactly what
  it is about to run; the stored copy a sweep re-enqueues keeps the dispatcher's signature
  (workers never sign what they read from Redis). The task a message is for is part of it
  (``task``, absent for ``toolhub.execute``), so a message cannot run as another task.
* a session record: its id, workspace and config hash. The config itself is checked against
  its hash by the worker (``workers/calls/toolsets.py``), so it needs no signature of its own.
* the tool lists of a session's stdio MCP servers (``mcp_tools.py``): the only thing workers
  sign, since they produce it themselves (it is what their servers listed), never copied from
  Redis. The MAC covers the session id, config hash and the list, so a writer of Redis cannot
  put tool names or descriptions before a model, nor move a list to another session.

``kid`` is a fingerprint of the key, not a secret: a refusal names the key a message was
signed with. ``TOOLHUB_FLEET_KEY_PREVIOUS`` is accepted as well while a new key rolls out.

Replay. Every signed message carries its issue time (``iat``, whole seconds of the
dispatcher's clock) inside what is signed, and its nonce is its run id (64 random bits, fresh
for every dispatch, signed too). A worker refuses a message issued further than the fleet's
message age (``Settings.message_max_age_seconds``: by default the longest a call can
legitimately live, queue wait and every attempt included) from its own clock, and one without
an issue time (``expired``). Within that age, a message whose run already finished is refused
by its claim (``replayed``): finishing a call writes a marker under its run id that its
record's reset does not touch (``scripts.py``). Legitimate redeliveries (kombu's, a sweep's
re-enqueue after a lost worker, a hand-back) carry the same run id but find the run
unfinished, and run as before. What is left to a writer of Redis: replaying a signed message
of a run that has not finished, or, by deleting that run's marker too, of one that finished
less than the message age ago (it runs what was signed, in the session it was signed for);
and whatever needs no worker (deleting keys, failing calls). A new message, another session
or another workspace cannot be made, and nothing older than the message age runs again.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from functools import lru_cache
from typing import Any

from toolhub.errors import ToolhubError

from .celery_app import EXECUTE_TASK
from .codec import pack

KEY_ENV = "TOOLHUB_FLEET_KEY"
PREVIOUS_KEY_ENV = "TOOLHUB_FLEET_KEY_PREVIOUS"
REQUIRE_ENV = "TOOLHUB_REQUIRE_SIGNED"
#: Shorter keys are refused: a guessable key would only look like protection.
MIN_KEY_CHARS = 32
VERSION = "v1"
_MESSAGE = b"toolhub:message:v1\0"
_SESSION = b"toolhub:session:v1\0"
_MCP_TOOLS = b"toolhub:mcp-tools:v1\0"
#: ``SignatureRefused.reason``: no signature at all, or one that does not verify.
UNSIGNED = "unsigned"
BAD_SIGNATURE = "bad_signature"
#: ``SignatureRefused.reason`` of a signed message with no issue time or one too far from now.
EXPIRED = "expired"
#: The signed issue time of a message (``sign_message``), in whole seconds since the epoch.
ISSUED_AT = "iat"


class FleetKeyError(ToolhubError, ValueError):
    """``TOOLHUB_FLEET_KEY`` is set but unusable. The message never contains the key."""


class SignatureRefused(ValueError):
    """A message or session record whose signature is missing or does not verify."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(why)
        self.reason = reason
        self.why = why


class FleetKey:
    """One key: signs, and names itself by ``kid``. Its repr shows the kid only."""

    __slots__ = ("_mac", "kid")

    def __init__(self, secret: str, env: str = KEY_ENV) -> None:
        if len(secret) < MIN_KEY_CHARS:
            raise FleetKeyError(
                f"{env} is too short ({len(secret)} characters, at least {MIN_KEY_CHARS}); "
                'generate one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        raw = secret.encode()
        self.kid = hashlib.sha256(b"toolhub:kid\0" + raw).hexdigest()[:12]
        self._mac = hmac.new(raw, digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        return f"FleetKey(kid={self.kid!r})"

    def sign(self, domain: bytes, data: bytes) -> str:
        mac = self._mac.copy()
        mac.update(domain)
        mac.update(data)
        return f"{VERSION}:{self.kid}:{mac.hexdigest()}"


class FleetKeys:
    """The key this process signs with, and every key it accepts (the previous one too)."""

    def __init__(self, current: FleetKey, previous: FleetKey | None = None) -> None:
        self.current = current
        self._by_kid = {key.kid: key for key in (previous, current) if key is not None}

    def sign_message(self, message: dict[str, Any]) -> dict[str, Any]:
        unsigned = {name: value for name, value in message.items() if name != "sig"}
        return {**unsigned, "sig": self.current.sign(_MESSAGE, pack(unsigned))}

    def verify_message(
        self, task: str, message: dict[str, Any], max_age: float, now: float | None = None
    ) -> None:
        """``SignatureRefused`` unless ``message`` was signed with a fleet key for ``task``,
        and issued at most ``max_age`` seconds away from ``now`` (this process's clock)."""
        unsigned = {name: value for name, value in message.items() if name != "sig"}
        try:
            data = pack(unsigned)
        except (TypeError, ValueError, OverflowError):
            raise SignatureRefused(BAD_SIGNATURE, "the message cannot be encoded") from None
        self._verify("message", _MESSAGE, data, message.get("sig"))
        if message.get("task", EXECUTE_TASK) != task:
            raise SignatureRefused(BAD_SIGNATURE, "the message is signed for another task")
        issued = message.get(ISSUED_AT)
        if not isinstance(issued, int) or isinstance(issued, bool):
            raise SignatureRefused(
                EXPIRED, "the message carries no issue time (signed by an older dispatcher)"
            )
        age = (time.time() if now is None else now) - issued
        if abs(age) > max_age:
            when = f"{age:.0f} s ago" if age > 0 else f"{-age:.0f} s in the future"
            raise SignatureRefused(
                EXPIRED, f"the message was issued {when}, beyond the fleet's {max_age:.0f} s"
            )

    def sign_session(self, sid: str, workspace: str, config_hash: str) -> str:
        return self.current.sign(_SESSION, pack([sid, workspace, config_hash]))

    def verify_session(self, sid: str, info: dict[str, str]) -> None:
        """``SignatureRefused`` unless the session record ``info`` of ``sid`` is signed."""
        data = pack([sid, info.get("workspace", ""), info.get("config_hash", "")])
        self._verify(f"session {sid!r}", _SESSION, data, info.get("sig"))

    def sign_mcp_tools(self, sid: str, config_hash: str, body: str) -> str:
        return self.current.sign(_MCP_TOOLS, pack([sid, config_hash, body]))

    def verify_mcp_tools(self, sid: str, config_hash: str, body: str, sig: object) -> None:
        """``SignatureRefused`` unless ``body`` (the published tool lists of ``sid``'s stdio
        MCP servers) was signed by a holder of a fleet key for this session and config."""
        data = pack([sid, config_hash, body])
        self._verify(f"MCP tool list of session {sid!r}", _MCP_TOOLS, data, sig)

    def _verify(self, what: str, domain: bytes, data: bytes, sig: object) -> None:
        if not isinstance(sig, str) or not sig:
            raise SignatureRefused(UNSIGNED, f"the {what} is not signed")
        version, _, rest = sig.partition(":")
        kid = rest.partition(":")[0]
        key = self._by_kid.get(kid) if version == VERSION else None
        if key is None:
            raise SignatureRefused(
                BAD_SIGNATURE,
                f"the {what} is signed with key {kid[:12]!r}, not this fleet's "
                f"{self.current.kid!r}",
            )
        expected = key.sign(domain, data)
        if not hmac.compare_digest(expected.encode(), sig.encode("utf-8", "replace")):
            raise SignatureRefused(BAD_SIGNATURE, f"the {what} has a signature that does not match")


def fleet_keys() -> FleetKeys | None:
    """The fleet keys of this process's environment, or None when no key is set.
    ``FleetKeyError`` when one is set but too short."""
    return _keys(os.environ.get(KEY_ENV) or None, os.environ.get(PREVIOUS_KEY_ENV) or None)


@lru_cache(maxsize=4)
def _keys(current: str | None, previous: str | None) -> FleetKeys | None:
    if current is None:
        return None
    old = FleetKey(previous, PREVIOUS_KEY_ENV) if previous is not None else None
    return FleetKeys(FleetKey(current), old)


def signing_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def sign_message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` dated now (``iat``) and signed (``sig``); unchanged when no key is set."""
    keys = fleet_keys()
    if keys is None:
        return message
    return keys.sign_message({**message, ISSUED_AT: int(time.time())})


def sign_session(sid: str, workspace: str, config_hash: str) -> str:
    """The ``sig`` field of a session record; empty (unsigned) when no key is set."""
    keys = fleet_keys()
    return "" if keys is None else keys.sign_session(sid, workspace, config_hash)


def sign_mcp_tools(sid: str, config_hash: str, body: str) -> str:
    """The signature of a published stdio MCP tool list; empty (unsigned) when no key is set."""
    keys = fleet_keys()
    return "" if keys is None else keys.sign_mcp_tools(sid, config_hash, body)
