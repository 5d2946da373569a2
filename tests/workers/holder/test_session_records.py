"""A session as a worker or the holder may trust it, read from a real Redis: an unknown session,
a call naming another config, a config gone or altered, or a record without the fleet's
signature builds nothing; a session's local directory never carries its id."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolhub.core import ToolError
from toolhub.distributed.signing import FleetKey, FleetKeys
from toolhub.distributed.store import RedisStore
from toolhub.toolset import ToolSetConfig
from workers.holder.session_records import session_dir, verified_config, verified_session

KEY = "k" * 43
CONFIG = ToolSetConfig.model_validate({"tools": [{"id": "Main:bash"}]})


def _code(exc: pytest.ExceptionInfo[ToolError]) -> str | None:
    error = exc.value
    return None if error.code is None else str(error.code)


def test_a_stored_session_reads_back_with_its_workspace(bare_store: RedisStore, tmp_path: Path):
    config_hash = _put(bare_store, "s1", CONFIG, str(tmp_path))
    info = verified_session(bare_store, None, "s1")
    config, workspace = verified_config(bare_store, None, "s1", info, config_hash)
    assert config.config_hash() == config_hash and workspace == tmp_path


def test_what_cannot_be_trusted_builds_nothing(bare_store: RedisStore, tmp_path: Path) -> None:
    with pytest.raises(ToolError) as unknown:
        verified_session(bare_store, None, "nobody")
    assert _code(unknown) == "session_unknown"
    config_hash = _put(bare_store, "s2", CONFIG, str(tmp_path))
    info = verified_session(bare_store, None, "s2")
    with pytest.raises(ToolError, match="names config other, but") as other:
        verified_config(bare_store, None, "s2", info, "other")
    assert _code(other) == "session_unknown"
    bare_store.client.delete(bare_store.keys.config(config_hash))
    with pytest.raises(ToolError, match="is not in Redis") as gone:
        verified_config(bare_store, None, "s2", info, config_hash)
    assert _code(gone) == "session_unknown"


def test_with_a_fleet_key_an_unsigned_record_or_altered_config_is_refused(
    bare_store: RedisStore, tmp_path: Path
) -> None:
    keys = FleetKeys(FleetKey(KEY))
    config_hash = _put(bare_store, "s3", CONFIG, str(tmp_path))  # no key: unsigned
    with pytest.raises(ToolError, match="nothing ran") as unsigned:
        verified_session(bare_store, keys, "s3")
    assert _code(unsigned) == "message_refused"
    bare_store.client.hset(
        bare_store.keys.session("s3"), "sig", keys.sign_session("s3", str(tmp_path), config_hash)
    )
    info = verified_session(bare_store, keys, "s3")
    altered = ToolSetConfig.model_validate({"tools": [{"id": "Main:read_file"}]})
    bare_store.client.set(bare_store.keys.config(config_hash), altered.model_dump_json())
    with pytest.raises(ToolError, match="does not have that hash") as changed:
        verified_config(bare_store, keys, "s3", info, config_hash)
    assert _code(changed) == "message_refused"


def test_a_session_directory_is_named_by_an_hmac_of_its_id(tmp_path: Path) -> None:
    first = session_dir(tmp_path, "secret-session-id")
    assert first == session_dir(tmp_path, "secret-session-id")
    assert first != session_dir(tmp_path, "another-session")
    assert "secret-session-id" not in str(first)
    assert first.parent == tmp_path / "worker-sessions"
    assert (tmp_path / "worker-sessions" / ".names.key").stat().st_mode & 0o077 == 0


def _put(store: RedisStore, sid: str, config: ToolSetConfig, workspace: str) -> str:
    """Store a session as the dispatcher does; its config hash."""
    config_hash = config.config_hash()
    store.put_session(
        sid, config=config.model_dump_json(), config_hash=config_hash, workspace=workspace
    )
    return config_hash
