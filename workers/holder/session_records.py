"""A session as a worker (or the host's holder) may trust it: its record and config read from
Redis and checked, and the directory of its local files.

Threat: whatever Redis holds was written by whoever can write Redis. With a fleet key the
record must carry a valid signature over its id, workspace and config hash, and the stored
config must hash to that hash; the recorded workspace (resolved by the gateway at creation)
must still have no symlink on its path (``workspace_moved``). And a session id is the gateway's
per-session capability, so it appears in no path a command can see (``/proc/*/cmdline`` of a
bwrap or Landlock wrapper names the session's tmp): a session's local directory is named by an
HMAC of its id under a key kept in ``$TOOLHUB_HOME`` (``local_secrets.py``).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
from pathlib import Path

from redis.exceptions import RedisError

from toolhub.backends.session_info import remove_scratch
from toolhub.backends.workspace_pin import require_real
from toolhub.core import ToolError
from toolhub.distributed.signing import FleetKeys, SignatureRefused
from toolhub.distributed.store import RedisStore
from toolhub.errors import ErrorCode
from toolhub.toolset import ToolSetConfig

from .local_secrets import local_secret

logger = logging.getLogger("toolhub.worker")


def verified_session(store: RedisStore, keys: FleetKeys | None, session_id: str) -> dict[str, str]:
    """The session's record; ``session_unknown`` when absent, ``message_refused`` when its
    signature does not hold."""
    info = store.get_session(session_id)
    if info is None:
        raise ToolError.custom(ErrorCode.SESSION_UNKNOWN, f"session {session_id!r} is not in Redis")
    if keys is not None:
        try:
            keys.verify_session(session_id, info)
        except SignatureRefused as refused:
            # Written to Redis by something without the fleet key: its workspace and
            # config are nobody's to trust.
            logger.warning("session %s: record refused: %s", session_id, refused.why)
            raise ToolError.custom(
                ErrorCode.MESSAGE_REFUSED, f"refused: {refused.why}; nothing ran"
            ) from None
    return info


def verified_config(
    store: RedisStore,
    keys: FleetKeys | None,
    session_id: str,
    info: dict[str, str],
    config_hash: str,
) -> tuple[ToolSetConfig, Path]:
    """The session's config (the one its record names) and its workspace, checked."""
    if info.get("config_hash") != config_hash:
        # The message names a config that is not this session's: a stale dispatcher or a
        # forged message. Running it would give the session tools it was never given.
        raise ToolError.custom(
            ErrorCode.SESSION_UNKNOWN,
            f"refused: the call names config {config_hash}, but session {session_id!r} "
            f"runs config {info.get('config_hash')}",
        )
    text = store.get_config(config_hash)
    if text is None:
        raise ToolError.custom(
            ErrorCode.SESSION_UNKNOWN,
            f"config {config_hash} of session {session_id!r} is not in Redis",
        )
    config = ToolSetConfig.model_validate_json(text)
    if keys is not None and config.config_hash() != config_hash:
        # The signed session names this hash; a config stored under it that does not
        # hash to it was altered in Redis.
        logger.warning("session %s: config %s refused: altered", session_id, config_hash)
        raise ToolError.custom(
            ErrorCode.MESSAGE_REFUSED,
            f"refused: the config stored as {config_hash} does not have that hash; nothing ran",
        )
    # The gateway resolved it at creation: a symlink on its path now is a swap.
    return config, require_real(info["workspace"])


def session_dir(home: Path, session_id: str) -> Path:
    """Where this host keeps the session's files (private tmp, command logs, worktrees):
    named by an HMAC of its id, never by the id."""
    digest = hmac.new(_dir_key(home), session_id.encode(), hashlib.sha256).hexdigest()[:32]
    return home / "worker-sessions" / digest


@functools.cache
def _dir_key(home: Path) -> bytes:
    return local_secret(home / "worker-sessions" / ".names.key").encode()


def forget_ended(store: RedisStore, directory: Path, session_id: str) -> bool:
    """Remove the command logs and tmp in ``directory`` (the session's here) once the
    session's record is gone (deleted); False when it still exists or Redis cannot say."""
    try:
        if store.has_session(session_id):
            return False
    except RedisError:
        return False
    remove_scratch(directory)
    return True
