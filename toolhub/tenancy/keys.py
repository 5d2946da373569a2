"""Named API keys: several per tenant, created and revoked by the operator (``toolhub keys``),
stored hashed in one JSON file, and what a bearer credential names (``Principals``).

A key reads ``thk_<key id>_<secret>``: the key id (12 hex digits) is what logs and ``toolhub
keys list`` show, the secret is 32 random bytes. The file (``TOOLHUB_KEYS_FILE``, default
``$TOOLHUB_HOME/keys.json``, mode 0600, replaced atomically) holds each key's id, tenant,
name, creation time, revoked flag and the SHA-256 of the whole key, never the key: a reader of
the file learns who has keys, not how to use one (256 random bits do not fall to a dictionary,
so one unsalted hash is enough). A gateway re-reads the file when it changes, looked at (one
``stat``) at most once a second, so a revoke holds within about a second without a restart.

The single ``TOOLHUB_API_TOKEN`` stays: each of its comma-separated tokens is a principal of the
default tenant (key ids ``token-1``, ``token-2`` … in the order listed). With no token and no
key at all every caller is ``ANONYMOUS`` (a gateway only starts so on loopback, or behind an
authenticating proxy). The fleet is multi-tenant once the file holds a key, revoked or not.

Threat: a caller presenting a guessed, stolen-then-revoked, or malformed credential; and a
timing side channel on the comparison (every comparison is ``hmac.compare_digest``).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolhub.errors import ErrorCode, ToolhubError

from .principal import ANONYMOUS, DEFAULT_TENANT, TENANT_PATTERN, Principal

logger = logging.getLogger("toolhub.tenancy.keys")

KEYS_FILE_ENV = "TOOLHUB_KEYS_FILE"
KEY_PREFIX = "thk_"
#: How often (seconds) a ``Principals`` looks whether the key file changed.
RECHECK_S = 1.0
_KEY_ID = re.compile(r"^[0-9a-f]{12}$")
_NAME = re.compile(r"^[\w .@:/+-]{0,64}$")


class KeyFileError(ToolhubError):
    """The key file cannot be read, parsed or written."""

    code = ErrorCode.KEY_FILE_ERROR


class UnknownKey(ToolhubError):
    """No key of that id in the key file."""

    code = ErrorCode.UNKNOWN_KEY


class Unauthorized(Exception):
    """A request's credentials name no principal; ``reason`` says why, in words fit for the
    caller and the log (never the credential)."""

    def __init__(self, reason: str, key_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key_id = key_id


def default_keys_file() -> Path:
    """``TOOLHUB_KEYS_FILE``, else ``$TOOLHUB_HOME/keys.json`` (home default ``~/.toolhub``)."""
    named = os.environ.get(KEYS_FILE_ENV)
    if named:
        return Path(named).expanduser()
    return Path(os.environ.get("TOOLHUB_HOME", "~/.toolhub")).expanduser() / "keys.json"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One key as stored: everything but the key itself."""

    key_id: str
    tenant: str
    name: str
    created: str
    sha256: str
    revoked: bool = False

    @property
    def principal(self) -> Principal:
        return Principal(self.tenant, self.key_id)

    @classmethod
    def from_dict(cls, data: Any) -> ApiKey:
        if not isinstance(data, dict):
            raise ValueError("a key entry is not an object")
        key = cls(
            key_id=str(data["key_id"]),
            tenant=str(data["tenant"]),
            name=str(data.get("name", "")),
            created=str(data.get("created", "")),
            sha256=str(data["sha256"]),
            revoked=bool(data.get("revoked", False)),
        )
        if not _KEY_ID.match(key.key_id) or len(key.sha256) != 64:
            raise ValueError(f"key entry {key.key_id!r} is malformed")
        if not re.match(TENANT_PATTERN, key.tenant):
            raise ValueError(f"key entry {key.key_id!r} names a malformed tenant")
        return key


class KeyFile:
    """The key file: read, and changed (create, revoke) under an exclusive lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, ApiKey]:
        """Every key by id; none when the file does not exist."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise KeyFileError(f"cannot read key file {self.path}: {exc.strerror}") from None
        try:
            entries = json.loads(text).get("keys", [])
            keys = [ApiKey.from_dict(entry) for entry in entries]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise KeyFileError(f"key file {self.path} is malformed: {exc}") from None
        return {key.key_id: key for key in keys}

    def create(self, tenant: str, name: str = "") -> tuple[ApiKey, str]:
        """A new key of ``tenant``: its stored entry and the key itself (shown once)."""
        if not re.match(TENANT_PATTERN, tenant):
            raise ValueError(f"tenant name {tenant!r} does not match {TENANT_PATTERN}")
        if not _NAME.match(name):
            raise ValueError(
                "a key name is at most 64 letters, digits, spaces or . @ : / + - _ characters"
            )
        with self._locked():
            keys = self.read()
            key_id = secrets.token_hex(6)
            while key_id in keys:
                key_id = secrets.token_hex(6)
            key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
            created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            entry = ApiKey(key_id, tenant, name, created, digest(key))
            self._write([*keys.values(), entry])
        return entry, key

    def revoke(self, key_id: str) -> ApiKey:
        """Mark the key revoked (kept, so ``list`` shows it and the tenant's layout stays)."""
        with self._locked():
            keys = self.read()
            if key_id not in keys:
                raise UnknownKey(f"no key {key_id!r} in {self.path}")
            keys[key_id] = replace(keys[key_id], revoked=True)
            self._write(list(keys.values()))
        return keys[key_id]

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Held while reading and rewriting, so two ``toolhub keys`` never lose a change."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            lock = self.path.with_name(self.path.name + ".lock")
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
        except OSError as exc:
            raise KeyFileError(f"cannot lock key file {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, keys: list[ApiKey]) -> None:
        """Replace the file atomically with one of mode 0600 (``mkstemp`` creates it so)."""
        body = json.dumps({"version": 1, "keys": [asdict(k) for k in keys]}, indent=2) + "\n"
        try:
            fd, tmp = tempfile.mkstemp(prefix=".keys-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w") as out:
                    out.write(body)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            raise KeyFileError(f"cannot write key file {self.path}: {exc.strerror}") from None


class Principals:
    """Who a bearer credential names: the default tenant's shared tokens, and the named keys
    of the key file (``None``: tokens only), re-read when the file changes."""

    def __init__(self, token: str | None, keys: KeyFile | None = None) -> None:
        self._tokens = [
            (part.encode(), Principal(DEFAULT_TENANT, f"token-{i}"))
            for i, part in enumerate(tokens_of(token or ""), start=1)
        ]
        self._file = keys
        self._keys: dict[str, ApiKey] = {}
        self._seen: tuple[int, int, int] | None = None
        self._next_check = 0.0
        self._unreadable = False
        if keys is not None:
            self._keys = keys.read()  # a malformed file stops the server from starting
            self._seen = self._signature()
            self._next_check = time.monotonic() + RECHECK_S

    @property
    def open(self) -> bool:
        """Whether every caller is ``ANONYMOUS``: no token and no key."""
        self._refresh()
        return not self._tokens and not self._keys and not self._unreadable

    @property
    def multi_tenant(self) -> bool:
        """Whether the key file holds a key (revoked ones too: a tenant's layout stays)."""
        self._refresh()
        return bool(self._keys) or self._unreadable

    def resolve(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header value, or ``Unauthorized``."""
        if self.open:
            return ANONYMOUS
        if not authorization:
            raise Unauthorized("missing bearer token")
        scheme, _, given = authorization.partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            raise Unauthorized("missing bearer token")
        if given.startswith(KEY_PREFIX):
            return self._key(given)
        # Every token is compared, so the time taken does not tell which one nearly matched.
        found = None
        for known, principal in self._tokens:
            if hmac.compare_digest(given.encode(), known):
                found = principal
        if found is None:
            raise Unauthorized("wrong bearer token")
        return found

    def _key(self, given: str) -> Principal:
        key_id, _, secret = given[len(KEY_PREFIX) :].partition("_")
        entry = self._keys.get(key_id) if secret else None
        if entry is None or not hmac.compare_digest(digest(given), entry.sha256):
            raise Unauthorized("unknown API key")
        if entry.revoked:
            raise Unauthorized("revoked API key", key_id)
        return entry.principal

    def _signature(self) -> tuple[int, int, int] | None:
        assert self._file is not None
        try:
            st = os.stat(self._file.path)
        except FileNotFoundError:
            return None
        except OSError:
            return (-1, -1, -1)
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        """Re-read the key file when its inode, mtime or size changed (a ``stat`` at most
        every ``RECHECK_S``). A file that cannot be read refuses every named key until it can
        (fail closed: a revoke in it must not be missed) and keeps the fleet multi-tenant."""
        if self._file is None:
            return
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + RECHECK_S
        seen = self._signature()
        if seen == self._seen:
            return
        try:
            self._keys, self._unreadable = self._file.read(), False
            self._seen = seen
        except KeyFileError as exc:
            if not self._unreadable:
                logger.warning("refusing every named API key: %s", exc)
            self._keys, self._unreadable, self._seen = {}, True, None


def tokens_of(token: str) -> list[str]:
    """The accepted tokens: ``TOOLHUB_API_TOKEN`` may list several, comma-separated (one per
    client; each is its own principal of the default tenant)."""
    return [part.strip() for part in token.split(",") if part.strip()]
