"""Where the holder runs a handed-over command comes from the session's own record and config
(a real Redis), never from the request: the session's workspace, a log directory under its
HMAC-named directory, the sandbox its config gives its commands; cached per (session, config
hash), and nothing at all for a session it cannot trust."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed.helpers import TASK_TOOLS
from toolhub.core import ToolError
from toolhub.distributed.store import RedisStore
from toolhub.sandbox import SandboxMode
from toolhub.tools import CATALOG
from toolhub.toolset import ToolSetBuilder, ToolSetConfig
from workers.holder.places import Place, SessionPlaces
from workers.holder.session_records import session_dir


def _config(mode: str) -> ToolSetConfig:
    return ToolSetConfig.model_validate(
        {
            "tools": [
                {"id": "Main:bash", "params": {"sandbox": {"mode": mode}}},
                *TASK_TOOLS["tools"][1:],
            ]
        }
    )


def test_a_place_is_derived_from_the_session_and_cached(
    bare_store: RedisStore, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / "home"
    config_hash = _put(bare_store, "s1", _config("read_only"), str(workspace))
    places = SessionPlaces(bare_store, None, ToolSetBuilder(CATALOG), home)
    place = places.get("s1", config_hash)
    assert isinstance(place, Place)
    assert place.workspace == workspace
    assert place.log_dir == session_dir(home, "s1") / "terminal"
    assert place.sandbox is not None
    assert place.sandbox.mode == SandboxMode.READ_ONLY and place.sandbox.workspace == workspace
    assert places.get("s1", config_hash) is place


def test_an_untrusted_session_has_no_place(bare_store: RedisStore, tmp_path: Path) -> None:
    places = SessionPlaces(bare_store, None, ToolSetBuilder(CATALOG), tmp_path)
    with pytest.raises(ToolError, match="not in Redis"):
        places.get("unknown", "h")
    config_hash = _put(bare_store, "s2", _config("read_only"), str(tmp_path))
    with pytest.raises(ToolError, match="names config"):
        places.get("s2", "not-" + config_hash)


def _put(store: RedisStore, sid: str, config: ToolSetConfig, workspace: str) -> str:
    """Store a session as the dispatcher does; its config hash."""
    config_hash = config.config_hash()
    store.put_session(
        sid, config=config.model_dump_json(), config_hash=config_hash, workspace=workspace
    )
    return config_hash
